package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/reconcile"
)

// The fleet specs run managers on the suite's control plane that engage
// three member control planes, a, b and c (fleetMember), from kubeconfig
// Secrets. The members start together once, for every spec of the
// container; each spec works in a namespace of its own in every plane.
var _ = Describe("a manager of a fleet of clusters", Ordered, func() {
	var a, b, c *fleetMember
	BeforeAll(func(ctx SpecContext) {
		start := time.Now()
		members := startMembers(ctx, "a", "b", "c")
		a, b, c = members[0], members[1], members[2]
		GinkgoWriter.Printf("members a, b and c ready in %v\n", time.Since(start).Round(time.Millisecond))
	}, NodeTimeout(3*time.Minute))

	It("reconciles each cluster's object with that cluster's client", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "cm", map[string]string{"k": "local"})
		seen := &reconciled{}
		for _, m := range []*fleetMember{a, b, c} {
			m.mirror(ctx, ns)
			m.configMap(ctx, ns, "cm", "in-"+m.name)
			m.engage(ctx, ns)
		}
		mgr := fleetManager(ns, seen, nil)
		startManager(ctx, mgr)
		Eventually(seenIn(ctx, kube, ns, "cm")).Should(Equal("/local"), "written through the manager's own cluster's client")
		for _, m := range []*fleetMember{a, b, c} {
			Eventually(seenIn(ctx, m.kube, ns, "cm")).WithTimeout(30*time.Second).Should(Equal(m.name+"/in-"+m.name), "written through %s's client", m.name)
		}
		Expect(seen.all()).To(HaveEach(BeElementOf(":cm=local", "a:cm=in-a", "b:cm=in-b", "c:cm=in-c")), "a reconcile saw another cluster's object")
		Expect(mgr.Clusters().Names()).To(Equal([]string{"", "a", "b", "c"}))
	})

	It("names a member in /metrics, the debug JSON and converge explain --cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		mgr := engageMembers(ctx, ns, "seen", &reconciled{}, a)
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
		Expect(i).NotTo(BeNumerically("<", 0), "the debug JSON lists a: %+v", state.Clusters)
		st := state.Clusters[i]
		Expect(st.State).To(Equal("ready"))
		Expect(st.Source).To(ContainSubstring(ns + "/a"))
		Expect(st.Objects).To(BeNumerically(">=", 1), "a's cache holds its ConfigMap")
		Expect(st.Bytes).To(BeNumerically(">", 0))

		Eventually(func(g Gomega) {
			code, out := explain(ctx, "ConfigMap", ns+"/cm", "--cluster", "a", "--controller", "fleet", "--url", base)
			g.Expect(out).To(ContainSubstring("ConfigMap a:" + ns + "/cm in controller fleet:\n  converged"))
			g.Expect(code).To(Equal(0), out)
		}).Should(Succeed())
		code, out := explain(ctx, "ConfigMap", ns+"/cm", "--cluster", "nowhere", "--controller", "fleet", "--url", base)
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("not watched: controller fleet does not watch cluster nowhere"))
	})

	It("disengages a deleted Secret within seconds: its watches end, its cache is freed, none of its changes is reconciled", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "marker", map[string]string{"k": "0"})
		seen := &reconciled{}
		mgr := engageMembers(ctx, ns, "0", seen, a, b)
		// c holds enough objects that its cache weighs several times the
		// others' together, so that "back within 10%" tells.
		c.mirror(ctx, ns)
		c.configMap(ctx, ns, "cm", "0")
		for i := range 150 {
			_, err := c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%03d", i)},
				Data:       map[string]string{"k": "bulk", "payload": strings.Repeat("p", 1024)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// Before c: the caches' bytes and c's API server's ConfigMap watches.
		Eventually(seen.has(":marker=0")).Should(BeTrue())
		before := cacheBytes(mgr)
		watchesBefore, err := c.watchers(ctx)()
		Expect(err).NotTo(HaveOccurred())

		c.engage(ctx, ns)
		Eventually(seenIn(ctx, c.kube, ns, "cm")).WithTimeout(30 * time.Second).Should(Equal("c/0"))
		Eventually(c.watchers(ctx)).Should(BeNumerically(">", watchesBefore), "c's API server serves the manager's watch")
		Eventually(func() int64 { return cacheBytes(mgr) - before }).Should(BeNumerically(">", 2*before), "c's cache holds its objects")
		with := cacheBytes(mgr)
		watchesWith, err := c.watchers(ctx)()
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		metrics := "http://" + mgr.MetricsAddress() + "/metrics"
		Eventually(func() (string, error) { res, err := httpGet(ctx, http.DefaultClient, metrics)(); return res.Body, err }).
			Should(MatchRegexp(`converge_cluster_cache_bytes\{cluster="c"\} [1-9]`))

		Expect(kube.CoreV1().Secrets(ns).Delete(ctx, "c", metav1.DeleteOptions{})).To(Succeed())
		Eventually(mgr.Clusters().Names).Should(Equal([]string{"", "a", "b"}), "c is disengaged, a and b are not")
		Eventually(c.watchers(ctx)).Should(Equal(watchesBefore), "the manager's watches of c ended")
		Eventually(func() int64 { return cacheBytes(mgr) }).Should(BeNumerically("~", before, before/10), "the caches' bytes are back within 10% of before c")
		GinkgoWriter.Printf("cache bytes of every cluster: %d before c, %d with c, %d after; c's ConfigMap watches: %d, %d, %d\n",
			before, with, cacheBytes(mgr), watchesBefore, watchesWith, watchesBefore)
		Eventually(func() (string, error) { res, err := httpGet(ctx, http.DefaultClient, metrics)(); return res.Body, err }).
			ShouldNot(ContainSubstring(`cluster="c"`), "c's series are deleted")

		reconcilesOfC := seen.count("c:")()
		setK(ctx, c.kube, ns, "cm", "1")
		for _, m := range []*fleetMember{a, b} {
			setK(ctx, m.kube, ns, "cm", "1")
		}
		setK(ctx, kube, ns, "marker", "1")
		Eventually(seen.has(":marker=1")).Should(BeTrue(), "the marker in the manager's own cluster is reconciled")
		for _, m := range []*fleetMember{a, b} {
			Eventually(seenIn(ctx, m.kube, ns, "cm")).Should(Equal(m.name+"/1"), "a change in %s, still engaged, is reconciled", m.name)
		}
		Expect(seen.count("c:")()).To(Equal(reconcilesOfC), "a change in the disengaged cluster was reconciled")
		Expect(seenIn(ctx, c.kube, ns, "cm")()).To(Equal("c/0"), "the disengaged cluster was written")
	})

	It("re-engages a rotated kubeconfig and loses no change made meanwhile", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		seen := &reconciled{}
		mgr := engageMembers(ctx, ns, "0", seen, a, b)
		first, err := mgr.Clusters().Get("a")
		Expect(err).NotTo(HaveOccurred())
		other, err := mgr.Clusters().Get("b")
		Expect(err).NotTo(HaveOccurred())

		rotatedCfg, err := a.plane.AddUser(envtest.User{Name: "fleet-rotated-" + ns, Groups: []string{"system:masters"}})
		Expect(err).NotTo(HaveOccurred())
		rotated, err := envtest.Kubeconfig(rotatedCfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, fleetSecret(ns, "a", rotated), metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A change while the old engagement ends and the new one lists:
		// whichever sees it, it must not be lost in between.
		setK(ctx, a.kube, ns, "cm", "1")
		Eventually(func() bool {
			c, err := mgr.Clusters().Get("a")
			return err == nil && c != first && string(c.Config().CertData) == string(rotatedCfg.CertData)
		}).WithTimeout(30*time.Second).Should(BeTrue(), "a is engaged anew with the rotated identity")
		Expect(first.Context().Err()).To(HaveOccurred(), "the old connection is disengaged")
		Eventually(seenIn(ctx, a.kube, ns, "cm")).WithTimeout(30*time.Second).Should(Equal("a/1"), "the change made during the rotation is reconciled")

		setK(ctx, a.kube, ns, "cm", "2")
		Eventually(seenIn(ctx, a.kube, ns, "cm")).WithTimeout(30*time.Second).Should(Equal("a/2"), "a change after the rotation is reconciled and written")
		now, err := mgr.Clusters().Get("b")
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(BeIdenticalTo(other), "b, whose Secret did not change, kept its engagement")
	})

	It("catches up with a member whose API server stopped and started again, and reconciles the others meanwhile", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "marker", map[string]string{"k": "0"})
		seen := &reconciled{}
		mgr := engageMembers(ctx, ns, "0", seen, a, b)

		Expect(b.plane.StopAPIServer(ctx)).To(Succeed())
		DeferCleanup(b.plane.StartAPIServer, NodeTimeout(time.Minute)) // for the specs after this one, should it fail
		Eventually(clusterState(mgr, "b")).WithTimeout(30*time.Second).Should(Equal(cluster.StateUnhealthy), "the manager sees b down")
		setK(ctx, a.kube, ns, "cm", "1")
		setK(ctx, kube, ns, "marker", "1")
		Eventually(seenIn(ctx, a.kube, ns, "cm")).Should(Equal("a/1"), "a change in a is reconciled while b is down")
		Eventually(seen.has(":marker=1")).Should(BeTrue(), "a change in the manager's own cluster is reconciled while b is down")

		// A change as soon as b serves again, while the manager may still
		// hold b's keys (its probes have not passed yet) and its watch
		// reconnects.
		Expect(b.plane.StartAPIServer(ctx)).To(Succeed())
		setK(ctx, b.kube, ns, "cm", "1")
		Eventually(seenIn(ctx, b.kube, ns, "cm")).WithTimeout(30*time.Second).Should(Equal("b/1"), "a change in b once it is back is reconciled")
		Eventually(clusterState(mgr, "b")).Should(Equal(cluster.StateReady), "b is healthy again")
		Expect(mgr.Clusters().Names()).To(Equal([]string{"", "a", "b"}))
	})

	It("fences the write of a reconcile that ignores its context while its cluster is disengaged", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a.mirror(ctx, ns)
		a.configMap(ctx, ns, "cm", "0")
		a.engage(ctx, ns)
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
		cm, err := a.kube.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data["k"]).To(Equal("0"), "the disengaged cluster's object was written")
	})

	It("reports a garbage, a tokenFile and a duplicate kubeconfig Secret by name and field, and engages the good one", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a.mirror(ctx, ns)
		tokenFile := []byte(strings.Replace(string(a.kubeconfig), "client-certificate-data:", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n    client-certificate-data:", 1))
		// The informer lists the Secrets in name order: "first" engages
		// "a", and "second", naming it too, is the duplicate.
		for _, s := range []*corev1.Secret{
			fleetSecret(ns, "garbage", []byte("{this is: [not a kubeconfig")),
			fleetSecret(ns, "token-file", tokenFile),
			fleetSecret(ns, "first", a.kubeconfig),
			fleetSecret(ns, "second", a.kubeconfig),
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

	members := func() []*fleetMember { return []*fleetMember{a, b, c} }
	fleetChildrenSpecs(members)
	fleetExampleSpecs(members)
})
