package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/reconcile"
)

// The fleet specs run a manager on the suite's control plane that engages
// a second control plane, A, from a kubeconfig Secret: A has its own API
// server and etcd (no controller manager: CPU is scarce), so nothing but
// the kubeconfig connects the two.
var _ = Describe("a manager of a fleet of clusters", Ordered, func() {
	var (
		planeA *envtest.Environment
		kubeA  kubernetes.Interface
		// kubeconfigA is the Secret data that reaches A as its admin.
		kubeconfigA []byte
	)
	BeforeAll(func(ctx SpecContext) {
		planeA = envtest.New(envtest.Options{})
		DeferCleanup(planeA.Stop)
		cfgA, err := planeA.Start(ctx)
		Expect(err).NotTo(HaveOccurred(), "start control plane A")
		kubeA, err = kubernetes.NewForConfig(cfgA)
		Expect(err).NotTo(HaveOccurred())
		kubeconfigA, err = envtest.Kubeconfig(cfgA)
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(2*time.Minute))

	// fleetSecret returns the kubeconfig Secret ns/name for data, selected
	// by the default label.
	fleetSecret := func(ns, name string, data []byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{secrets.DefaultLabel: "true"}},
			Data:       map[string][]byte{"kubeconfig": data},
		}
	}
	// fleetManager returns a manager of namespace ns (in every cluster)
	// with a Secret provider reading ns, and a controller of ConfigMaps in
	// every cluster that records each reconcile's cluster and data and
	// writes an annotation through that cluster's client.
	type reconciled struct {
		mu  sync.Mutex
		got []string
	}
	fleetManager := func(ns string, seen *reconciled, nameFrom func(*corev1.Secret) string) *framework.Manager {
		GinkgoHelper()
		p, err := secrets.New(secrets.Options{Namespace: ns, NameFrom: nameFrom})
		Expect(err).NotTo(HaveOccurred())
		mgr := newManager(ns, framework.Options{
			Clusters: cluster.Options{Providers: []cluster.Provider{p}},
			Metrics:  framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		})
		err = framework.NewBuilder[*corev1.ConfigMap](mgr, "fleet", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				c := cluster.From(ctx)
				seen.mu.Lock()
				seen.got = append(seen.got, fmt.Sprintf("%s:%s=%s", c.Name(), cm.Name, cm.Data["k"]))
				seen.mu.Unlock()
				want := c.Name() + "/" + cm.Data["k"]
				if cm.Annotations["seen-in"] == want {
					return reconcile.Result{}, nil
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"seen-in":%q}}}`, want)
				return reconcile.Result{}, c.Client().Patch(ctx, cm.DeepCopy(), types.MergePatchType, []byte(patch))
			}))
		Expect(err).NotTo(HaveOccurred())
		return mgr
	}
	has := func(seen *reconciled, entry string) func() bool {
		return func() bool {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			return slices.Contains(seen.got, entry)
		}
	}
	count := func(seen *reconciled, prefix string) func() int {
		return func() int {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			n := 0
			for _, g := range seen.got {
				if strings.HasPrefix(g, prefix) {
					n++
				}
			}
			return n
		}
	}
	annotation := func(ctx context.Context, cs kubernetes.Interface, ns, name string) func() string {
		return func() string {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			return cm.Annotations["seen-in"]
		}
	}
	// mirrorNamespace creates namespace ns in A too.
	mirrorNamespace := func(ctx context.Context, ns string) {
		GinkgoHelper()
		_, err := kubeA.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	// engageA creates namespace ns and ConfigMap ns/cm holding k=v in A,
	// and the Secret "a" of A's kubeconfig in ns of the local plane, then
	// starts a fleetManager of ns.
	engageA := func(ctx context.Context, ns, v string, seen *reconciled) *framework.Manager {
		GinkgoHelper()
		mirrorNamespace(ctx, ns)
		_, err := kubeA.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": v}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, fleetSecret(ns, "a", kubeconfigA), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		mgr := fleetManager(ns, seen, nil)
		startManager(ctx, mgr)
		return mgr
	}

	It("reconciles each cluster's object with that cluster's client", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "cm", map[string]string{"k": "local"})
		seen := &reconciled{}
		mgr := engageA(ctx, ns, "in-a", seen)
		Eventually(has(seen, ":cm=local")).Should(BeTrue(), "the manager's own cluster's object is reconciled")
		Eventually(has(seen, "a:cm=in-a")).WithTimeout(30*time.Second).Should(BeTrue(), "A's object is reconciled with A's data")
		Eventually(annotation(ctx, kube, ns, "cm")).Should(Equal("/local"), "written through the manager's own cluster's client")
		Eventually(annotation(ctx, kubeA, ns, "cm")).Should(Equal("a/in-a"), "written through A's client")
		seen.mu.Lock()
		for _, g := range seen.got {
			Expect(g).To(BeElementOf(":cm=local", "a:cm=in-a"), "a reconcile saw another cluster's object")
		}
		seen.mu.Unlock()
		Expect(mgr.Clusters().Names()).To(Equal([]string{"", "a"}))
	})

	It("names A in /metrics, the debug JSON and converge explain --cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		mgr := engageA(ctx, ns, "seen", &reconciled{})
		Eventually(annotation(ctx, kubeA, ns, "cm")).WithTimeout(30 * time.Second).Should(Equal("a/seen"))
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		base := "http://" + mgr.MetricsAddress()
		Eventually(func(g Gomega) {
			res, err := httpGet(ctx, http.DefaultClient, base+"/metrics")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Body).To(ContainSubstring(`converge_cluster_reconciles_total{cluster="a",controller="fleet",result="success"}`))
			g.Expect(res.Body).To(ContainSubstring(`converge_cluster_engaged{cluster="a"} 1`))
			g.Expect(res.Body).To(ContainSubstring(`converge_cluster_healthy{cluster="a"} 1`))
			g.Expect(res.Body).To(MatchRegexp(`converge_cluster_cache_bytes\{cluster="a"\} [1-9]`))
		}).Should(Succeed())

		res, err := httpGet(ctx, http.DefaultClient, base+introspect.Path+"api/state")()
		Expect(err).NotTo(HaveOccurred())
		var state introspect.State
		Expect(json.Unmarshal([]byte(res.Body), &state)).To(Succeed(), res.Body)
		i := slices.IndexFunc(state.Clusters, func(c introspect.ClusterStatus) bool { return c.Name == "a" })
		Expect(i).NotTo(BeNumerically("<", 0), "the debug JSON lists A: %+v", state.Clusters)
		a := state.Clusters[i]
		Expect(a.State).To(Equal("ready"))
		Expect(a.Source).To(ContainSubstring(ns + "/a"))
		Expect(a.Objects).To(BeNumerically(">=", 1), "A's cache holds its ConfigMap")
		Expect(a.Bytes).To(BeNumerically(">", 0))

		Eventually(func(g Gomega) {
			code, out := explain(ctx, "ConfigMap", ns+"/cm", "--cluster", "a", "--controller", "fleet", "--url", base)
			g.Expect(out).To(ContainSubstring("ConfigMap a:" + ns + "/cm in controller fleet:\n  converged"))
			g.Expect(code).To(Equal(0), out)
		}).Should(Succeed())
		code, out := explain(ctx, "ConfigMap", ns+"/cm", "--cluster", "nowhere", "--controller", "fleet", "--url", base)
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("not watched: controller fleet does not watch cluster nowhere"))
	})

	It("disengages a deleted Secret within seconds", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "marker", map[string]string{"k": "0"})
		seen := &reconciled{}
		mgr := engageA(ctx, ns, "0", seen)
		Eventually(annotation(ctx, kubeA, ns, "cm")).WithTimeout(30 * time.Second).Should(Equal("a/0"))

		Expect(kube.CoreV1().Secrets(ns).Delete(ctx, "a", metav1.DeleteOptions{})).To(Succeed())
		Eventually(mgr.Clusters().Names).Should(Equal([]string{""}), "A is disengaged")
		before := count(seen, "a:")()
		patch := func(cs kubernetes.Interface, name, v string) {
			_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"k":"`+v+`"}}`), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		patch(kubeA, "cm", "1")
		patch(kube, "marker", "1")
		Eventually(has(seen, ":marker=1")).Should(BeTrue(), "the marker in the manager's own cluster is reconciled")
		Expect(count(seen, "a:")()).To(Equal(before), "a change in the disengaged cluster was reconciled")
		Expect(annotation(ctx, kubeA, ns, "cm")()).To(Equal("a/0"), "the disengaged cluster was written")
	})

	It("re-engages a rotated kubeconfig and reconciles through the new identity", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		seen := &reconciled{}
		mgr := engageA(ctx, ns, "0", seen)
		Eventually(annotation(ctx, kubeA, ns, "cm")).WithTimeout(30 * time.Second).Should(Equal("a/0"))
		first, err := mgr.Clusters().Get("a")
		Expect(err).NotTo(HaveOccurred())

		rotatedCfg, err := planeA.AddUser(envtest.User{Name: "fleet-rotated", Groups: []string{"system:masters"}})
		Expect(err).NotTo(HaveOccurred())
		rotated, err := envtest.Kubeconfig(rotatedCfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, fleetSecret(ns, "a", rotated), metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			c, err := mgr.Clusters().Get("a")
			return err == nil && c != first && string(c.Config().CertData) == string(rotatedCfg.CertData)
		}).WithTimeout(30*time.Second).Should(BeTrue(), "A is engaged anew with the rotated identity")
		Expect(first.Context().Err()).To(HaveOccurred(), "the old connection is disengaged")

		_, err = kubeA.CoreV1().ConfigMaps(ns).Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"k":"1"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(annotation(ctx, kubeA, ns, "cm")).WithTimeout(30*time.Second).Should(Equal("a/1"), "a change after the rotation is reconciled and written")
	})

	It("fences the write of a reconcile that ignores its context while its cluster is disengaged", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		mirrorNamespace(ctx, ns)
		_, err := kubeA.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "0"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, fleetSecret(ns, "a", kubeconfigA), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		p, err := secrets.New(secrets.Options{Namespace: ns})
		Expect(err).NotTo(HaveOccurred())
		mgr := newManager(ns, framework.Options{
			Clusters: cluster.Options{Providers: []cluster.Provider{p}},
			Metrics:  framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		})
		entered, release := make(chan struct{}), make(chan struct{})
		written := make(chan error, 1)
		err = framework.NewBuilder[*corev1.ConfigMap](mgr, "stuck", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				c := cluster.From(ctx)
				if c.Name() != "a" {
					return reconcile.Result{}, nil
				}
				close(entered)
				<-release // ignores its context
				cp := cm.DeepCopy()
				cp.Data["k"] = "written after disengagement"
				err := c.Client().Update(context.WithoutCancel(ctx), cp)
				written <- err
				return reconcile.Result{}, err
			}))
		Expect(err).NotTo(HaveOccurred())
		startManager(ctx, mgr)
		Eventually(entered).WithTimeout(30 * time.Second).Should(BeClosed())
		Expect(kube.CoreV1().Secrets(ns).Delete(ctx, "a", metav1.DeleteOptions{})).To(Succeed())
		Eventually(mgr.Clusters().Names).Should(Equal([]string{""}), "A is disengaged")
		close(release)
		var werr error
		Eventually(written).Should(Receive(&werr))
		Expect(werr).To(MatchError(cluster.ErrDisengaged))
		cm, err := kubeA.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data["k"]).To(Equal("0"), "the disengaged cluster's object was written")
	})

	It("reports a garbage, a tokenFile and a duplicate kubeconfig Secret by name and field, and engages the good one", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		mirrorNamespace(ctx, ns)
		tokenFile := []byte(strings.Replace(string(kubeconfigA), "client-certificate-data:", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n    client-certificate-data:", 1))
		// The informer lists the Secrets in name order: "first" engages
		// "a", and "second", naming it too, is the duplicate.
		for _, s := range []*corev1.Secret{
			fleetSecret(ns, "garbage", []byte("{this is: [not a kubeconfig")),
			fleetSecret(ns, "token-file", tokenFile),
			fleetSecret(ns, "first", kubeconfigA),
			fleetSecret(ns, "second", kubeconfigA),
		} {
			s.Labels["cluster-name"] = map[string]string{"garbage": "g", "token-file": "t", "first": "a", "second": "a"}[s.Name]
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		seen := &reconciled{}
		mgr := fleetManager(ns, seen, func(s *corev1.Secret) string { return s.Labels["cluster-name"] })
		startManager(ctx, mgr)
		healthOf := func(source string) func() string {
			return func() string {
				for _, h := range mgr.Clusters().Health() {
					if h.Source == source {
						return string(h.State) + ": " + h.Err
					}
				}
				return "absent"
			}
		}
		Eventually(healthOf("Secret " + ns + "/garbage")).Should(ContainSubstring("failed: Secret " + ns + "/garbage: data.kubeconfig: not a kubeconfig"))
		Eventually(healthOf("Secret " + ns + "/token-file")).Should(ContainSubstring("failed: Secret " + ns + "/token-file: data.kubeconfig: refused: users[converge-admin].tokenFile names a local file"))
		Eventually(func() []string {
			var dup []string
			for _, h := range mgr.Clusters().Health() {
				if h.Cluster == "a" && h.State == cluster.StateFailed {
					dup = append(dup, h.Err)
				}
			}
			return dup
		}).Should(ConsistOf(And(ContainSubstring("Secret "+ns+"/first"), ContainSubstring("Secret "+ns+"/second"), ContainSubstring("engaged it first"))),
			"the duplicate name is reported once, naming both Secrets")
		Eventually(mgr.Clusters().Names).WithTimeout(30*time.Second).Should(Equal([]string{"", "a"}), "the good Secret's cluster is engaged; the broken ones are not")
	})
})
