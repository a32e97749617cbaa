package e2e_test

import (
	"cmp"
	"context"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/reconcile"
)

// newNamespace creates a namespace for the current spec alone, with a name the
// API server makes unique (so parallel processes and repeated runs never
// collide), and returns its name.
//
// Namespaces are not deleted: without kube-controller-manager a deleted
// namespace stays Terminating with its objects, which would only add work; the
// whole control plane goes away at the end of the suite.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create the spec's namespace")
	return ns.Name
}

// managerOptions completes opts for a spec's manager: logs go to GinkgoWriter
// (shown for failed specs) and the shared cache sees only namespace ns.
func managerOptions(ns string, opts framework.Options) framework.Options {
	if opts.Logger.GetSink() == nil {
		opts.Logger = GinkgoLogr
	}
	if opts.Cache.Namespace == "" {
		opts.Cache.Namespace = ns
	}
	if compactE2E && opts.Cache.Compact == nil {
		opts.Cache.Compact = compactKinds
	}
	return opts
}

// compactE2E runs the suite with every kind its managers cache compact
// (informers.Options.Compact): the built-in kinds and the example
// StaticSite. CONVERGE_E2E_COMPACT=1 sets it (make test-e2e-compact).
var compactE2E = os.Getenv("CONVERGE_E2E_COMPACT") == "1"

// compactKinds names the kinds compactE2E makes compact; few objects are
// kept decoded, so that reads decode often.
var compactKinds = func() map[schema.GroupKind]informers.CompactOptions {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return testenv.CompactKinds(s, informers.CompactOptions{Decoded: 8})
}()

// newManager returns a Manager on the suite's control plane that caches only
// namespace ns. See managerOptions.
func newManager(ns string, opts framework.Options) *framework.Manager {
	GinkgoHelper()
	mgr, err := framework.NewManager(cfg, managerOptions(ns, opts))
	Expect(err).NotTo(HaveOccurred(), "NewManager")
	return mgr
}

// runningManager is a Manager whose Start runs in a goroutine.
type runningManager struct {
	// cancel cancels Start's context.
	cancel context.CancelFunc
	// done is closed when Start has returned.
	done chan struct{}
	// err is what Start returned, and returned when; read them only after
	// done is closed.
	err      error
	returned time.Time
}

// runManager runs mgr.Start in a goroutine. A cleanup cancels it, if the spec
// has not, and waits for Start to return, whatever it returns: specs that
// expect an error read run.err once run.done is closed.
func runManager(ctx context.Context, mgr *framework.Manager) *runningManager {
	runCtx, cancel := context.WithCancel(ctx)
	run := &runningManager{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(run.done)
		run.err = mgr.Start(runCtx)
		run.returned = time.Now()
	}()
	DeferCleanup(run.stop, NodeTimeout(40*time.Second))
	return run
}

// stop cancels Start's context and waits for Start to return.
func (r *runningManager) stop(ctx SpecContext) {
	GinkgoHelper()
	r.cancel()
	// In-flight reconciles may take up to the default GracefulShutdownTimeout (30 s).
	Eventually(ctx, r.done).WithTimeout(35*time.Second).Should(BeClosed(), "Manager.Start did not return after its context was cancelled")
}

// startManager runs mgr.Start in a goroutine until the spec ends: a cleanup
// then cancels Start's context and asserts that Start returns nil.
func startManager(ctx context.Context, mgr *framework.Manager) *runningManager {
	run := runManager(ctx, mgr)
	DeferCleanup(func(ctx SpecContext) {
		run.stop(ctx)
		Expect(run.err).NotTo(HaveOccurred(), "Manager.Start returned an error after its context was cancelled")
	}, NodeTimeout(40*time.Second))
	return run
}

// recorder records the reconciles a controller makes: for each key, the start
// time of every call in order. It is safe for concurrent use by workers.
type recorder struct {
	mu sync.Mutex
	// calls holds the start time of each reconcile per key; mu guards it.
	calls map[reconcile.Request][]time.Time
}

func newRecorder() *recorder {
	return &recorder{calls: map[reconcile.Request][]time.Time{}}
}

// record notes a reconcile of req starting now and returns its attempt
// number for req, from 1.
func (r *recorder) record(req reconcile.Request) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[req] = append(r.calls[req], time.Now())
	return len(r.calls[req])
}

// count returns a function reporting how many times req was reconciled, for
// Eventually and Consistently.
func (r *recorder) count(req reconcile.Request) func() int {
	return func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.calls[req])
	}
}

// times returns the start times of req's reconciles, in order.
func (r *recorder) times(req reconcile.Request) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[req])
}

// keys returns every key reconciled so far, sorted.
func (r *recorder) keys() []reconcile.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.SortedFunc(maps.Keys(r.calls), func(a, b reconcile.Request) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// countingReconciler returns a reconciler that records every call in calls
// and succeeds.
func countingReconciler(calls *recorder) reconcile.Func {
	return func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		calls.record(req)
		return reconcile.Result{}, nil
	}
}

// gaps returns the durations between consecutive times.
func gaps(times []time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(times))
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]))
	}
	return out
}

// key returns the request for namespace/name.
func key(ns, name string) reconcile.Request {
	return reconcile.Request{Namespace: ns, Name: name}
}

// createConfigMap creates the ConfigMap ns/name holding data and returns it as stored.
func createConfigMap(ctx context.Context, ns, name string, data map[string]string) *corev1.ConfigMap {
	GinkgoHelper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       data,
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create ConfigMap %s/%s", ns, name)
	return cm
}

// newPod returns a minimal valid Pod ns/name; nothing runs it (there is no
// kubelet), so its status changes only when a spec writes it.
func newPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// metricValue returns a function reporting, for Eventually, the value of the
// series of family name in reg whose labels include every pair of labels (see
// scrape.value). It fails when no such series exists.
func metricValue(reg *prometheus.Registry, name string, labels map[string]string) func() (float64, error) {
	return func() (float64, error) {
		families, err := reg.Gather()
		if err != nil {
			return 0, err
		}
		s := make(scrape, len(families))
		for _, f := range families {
			s[f.GetName()] = f
		}
		return s.value(name, labels)
	}
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}
