package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/converge-dev/converge/reconcile"
)

// fleetMember is a control plane of its own (API server and etcd, no
// controller manager: CPU is scarce) that the fleet specs engage from a
// kubeconfig Secret named as the member, so that nothing but the
// kubeconfig connects it to the suite's control plane.
type fleetMember struct {
	name  string
	plane *envtest.Environment
	kube  kubernetes.Interface
	// kubeconfig is the Secret data that reaches the member as its admin.
	kubeconfig []byte
}

// startMembers starts a member per name, all at once (most of a start is
// waiting for etcd and kube-apiserver), and stops them at the end of the
// container.
func startMembers(ctx context.Context, names ...string) []*fleetMember {
	GinkgoHelper()
	members := make([]*fleetMember, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		m := &fleetMember{name: name, plane: envtest.New(envtest.Options{})}
		DeferCleanup(m.plane.Stop)
		members[i] = m
		wg.Go(func() {
			cfg, err := m.plane.Start(ctx)
			if err == nil {
				m.kube, err = kubernetes.NewForConfig(cfg)
			}
			if err == nil {
				m.kubeconfig, err = envtest.Kubeconfig(cfg)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		Expect(err).NotTo(HaveOccurred(), "start member %s", names[i])
	}
	return members
}

// mirror creates namespace ns in m.
func (m *fleetMember) mirror(ctx context.Context, ns string) {
	GinkgoHelper()
	_, err := m.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create namespace %s in member %s", ns, m.name)
}

// configMap creates ConfigMap ns/name holding k=v in m.
func (m *fleetMember) configMap(ctx context.Context, ns, name, v string) {
	GinkgoHelper()
	_, err := m.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": v}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create ConfigMap %s/%s in member %s", ns, name, m.name)
}

// set patches ConfigMap ns/name in cs to hold k=v.
func setK(ctx context.Context, cs kubernetes.Interface, ns, name, v string) {
	GinkgoHelper()
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"k":"`+v+`"}}`), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred(), "patch ConfigMap %s/%s", ns, name)
}

// engage creates the kubeconfig Secret ns/<m.name> that engages m.
func (m *fleetMember) engage(ctx context.Context, ns string) {
	GinkgoHelper()
	_, err := kube.CoreV1().Secrets(ns).Create(ctx, fleetSecret(ns, m.name, m.kubeconfig), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create the kubeconfig Secret of member %s", m.name)
}

// watchers returns how many watches of ConfigMaps m's API server serves
// now, as its apiserver_longrunning_requests gauge counts them.
func (m *fleetMember) watchers(ctx context.Context) func() (int, error) {
	series := regexp.MustCompile(`(?m)^apiserver_longrunning_requests\{([^}]*)\} (\d+)$`)
	return func() (int, error) {
		body, err := m.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, s := range series.FindAllStringSubmatch(string(body), -1) {
			if strings.Contains(s[1], `resource="configmaps"`) && strings.Contains(s[1], `verb="WATCH"`) {
				v, _ := strconv.Atoi(s[2])
				n += v
			}
		}
		return n, nil
	}
}

// fleetSecret returns the kubeconfig Secret ns/name for data, selected by
// the default label.
func fleetSecret(ns, name string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{secrets.DefaultLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": data},
	}
}

// reconciled records "<cluster>:<name>=<k>" for each reconcile of a
// fleetManager's controller.
type reconciled struct {
	mu  sync.Mutex
	got []string
}

// has reports whether entry was recorded, for Eventually.
func (r *reconciled) has(entry string) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Contains(r.got, entry)
	}
}

// count returns how many entries start with prefix, for Eventually.
func (r *reconciled) count(prefix string) func() int {
	return func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, g := range r.got {
			if strings.HasPrefix(g, prefix) {
				n++
			}
		}
		return n
	}
}

// all returns the entries so far.
func (r *reconciled) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// fleetHealth probes the engaged clusters every second, and calls one
// unhealthy after two failed probes in a row, so that a stopped member is
// seen in seconds.
var fleetHealth = cluster.HealthOptions{Interval: time.Second, FailureThreshold: 2}

// fleetManager returns a manager of namespace ns (in every cluster) with a
// Secret provider reading ns, and a controller of ConfigMaps in every
// cluster that records each reconcile's cluster and data in seen and
// writes the annotation seen-in=<cluster>/<k> through that cluster's
// client (unless the ConfigMap holds a payload).
func fleetManager(ns string, seen *reconciled, nameFrom func(*corev1.Secret) string) *framework.Manager {
	GinkgoHelper()
	p, err := secrets.New(secrets.Options{Namespace: ns, NameFrom: nameFrom})
	Expect(err).NotTo(HaveOccurred())
	mgr := newManager(ns, framework.Options{
		Clusters: cluster.Options{Providers: []cluster.Provider{p}, Health: fleetHealth},
		Metrics:  framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
	})
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "fleet", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			c := cluster.From(ctx)
			seen.mu.Lock()
			seen.got = append(seen.got, fmt.Sprintf("%s:%s=%s", c.Name(), cm.Name, cm.Data["k"]))
			seen.mu.Unlock()
			want := c.Name() + "/" + cm.Data["k"]
			if cm.Annotations["seen-in"] == want || cm.Data["payload"] != "" { // ConfigMaps with a payload are there to weigh: not written
				return reconcile.Result{}, nil
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"seen-in":%q}}}`, want)
			return reconcile.Result{}, c.Client().Patch(ctx, cm.DeepCopy(), types.MergePatchType, []byte(patch))
		}))
	Expect(err).NotTo(HaveOccurred())
	return mgr
}

// seenIn returns the seen-in annotation of ConfigMap ns/name in cs, or the
// error reading it, for Eventually.
func seenIn(ctx context.Context, cs kubernetes.Interface, ns, name string) func() string {
	return func() string {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Annotations["seen-in"]
	}
}

// engageMembers creates namespace ns and ConfigMap ns/cm holding k=v in
// each member, and the member's kubeconfig Secret in ns of the suite's
// control plane, then starts a fleetManager of ns and returns it once it
// reconciled each member's ConfigMap.
func engageMembers(ctx context.Context, ns, v string, seen *reconciled, members ...*fleetMember) *framework.Manager {
	GinkgoHelper()
	for _, m := range members {
		m.mirror(ctx, ns)
		m.configMap(ctx, ns, "cm", v)
		m.engage(ctx, ns)
	}
	mgr := fleetManager(ns, seen, nil)
	startManager(ctx, mgr)
	for _, m := range members {
		Eventually(seenIn(ctx, m.kube, ns, "cm")).WithTimeout(30*time.Second).Should(Equal(m.name+"/"+v), "%s's ConfigMap is reconciled", m.name)
	}
	return mgr
}

// cacheBytes returns the estimated heap bytes of every engaged cluster's
// cache, the manager's own included (cluster.Set.Stats, which the
// converge_cluster_cache_bytes series show per cluster).
func cacheBytes(mgr *framework.Manager) int64 {
	var n int64
	for _, s := range mgr.Clusters().Stats() {
		n += s.Bytes
	}
	return n
}

// clusterState returns the state of cluster name in mgr's Health, or
// "absent", for Eventually.
func clusterState(mgr *framework.Manager, name string) func() cluster.State {
	return func() cluster.State {
		for _, h := range mgr.Clusters().Health() {
			if h.Cluster == name {
				return h.State
			}
		}
		return "absent"
	}
}
