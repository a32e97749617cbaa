package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// keyTracker watches the reconciles of a fixed set of keys for the
// guarantees of the reconcile package: a key is never reconciled by two
// workers at once, and (since the cache only moves forward and a key's
// reconciles do not overlap) the states a key's reconciles see never go back.
type keyTracker struct {
	// inFlight counts the running reconciles of each key. The map is filled
	// before the controller starts and only read afterwards.
	inFlight map[reconcile.Request]*atomic.Int32

	overlaps   atomic.Int64 // reconciles that began while their key was in flight
	unexpected atomic.Int64 // reconciles of keys not in inFlight
	total      atomic.Int64
	active     atomic.Int32 // reconciles running now, across keys
	maxActive  atomic.Int32

	mu sync.Mutex
	// last is the value of data["n"] each key's last reconcile saw, and
	// regressions counts reconciles that saw a smaller value than the one
	// before; mu guards both.
	last        map[reconcile.Request]int
	regressions int
}

func newKeyTracker(keys []reconcile.Request) *keyTracker {
	t := &keyTracker{inFlight: map[reconcile.Request]*atomic.Int32{}, last: map[reconcile.Request]int{}}
	for _, k := range keys {
		t.inFlight[k] = &atomic.Int32{}
	}
	return t
}

func (t *keyTracker) Reconcile(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
	k := key(cm.Namespace, cm.Name)
	n, err := strconv.Atoi(cm.Data["n"])
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("data.n of %v: %w", k, err))
	}
	running, ok := t.inFlight[k]
	if !ok {
		t.unexpected.Add(1)
		return reconcile.Result{}, nil
	}
	if running.Add(1) != 1 {
		t.overlaps.Add(1)
	}
	defer running.Add(-1)
	t.total.Add(1)
	active := t.active.Add(1)
	defer t.active.Add(-1)
	for m := t.maxActive.Load(); active > m && !t.maxActive.CompareAndSwap(m, active); m = t.maxActive.Load() {
	}

	// Stand-in for the I/O of a real reconcile (1 to 3 ms), so that reconciles
	// of different keys overlap and new updates arrive while a key is held.
	// This is the workload under test, not the test waiting for something.
	work := time.NewTimer(time.Duration(1+rand.IntN(3)) * time.Millisecond)
	defer work.Stop()
	select {
	case <-work.C:
	case <-ctx.Done():
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if n < t.last[k] {
		t.regressions++
	}
	t.last[k] = n
	return reconcile.Result{}, nil
}

// seen returns a copy of the last value each key's reconcile saw.
func (t *keyTracker) seen() map[reconcile.Request]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.last)
}

var _ = Describe("concurrent workers", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("never reconcile one key twice at once, and reconcile every object's last update", func(ctx SpecContext) {
		const (
			objects  = 50
			updates  = 2000
			writers  = 10 // each writes objects/writers objects, so no write conflicts
			perObj   = updates / objects
			perWrite = objects / writers
		)
		names := make([]string, objects)
		keys := make([]reconcile.Request, objects)
		for i := range names {
			names[i] = fmt.Sprintf("cm-%02d", i)
			keys[i] = key(ns, names[i])
		}
		tracker := newKeyTracker(keys)
		mgr := newManager(ns, framework.Options{})
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "eight-workers", framework.ControllerOptions{Workers: 8}).
			Complete(tracker)).To(Succeed())
		startManager(ctx, mgr)

		By(fmt.Sprintf("updating %d ConfigMaps %d times each from %d goroutines", objects, perObj, writers))
		cms := make([]*corev1.ConfigMap, objects)
		for i, name := range names {
			cms[i] = createConfigMap(ctx, ns, name, map[string]string{"n": "0"})
		}
		client := kube.CoreV1().ConfigMaps(ns)
		errs := make([]error, writers)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				mine := cms[w*perWrite : (w+1)*perWrite]
				for n := 1; n <= perObj; n++ {
					for i, cm := range mine {
						cm.Data["n"] = strconv.Itoa(n)
						updated, err := client.Update(ctx, cm, metav1.UpdateOptions{})
						if err != nil {
							errs[w] = fmt.Errorf("update %s to n=%d: %w", cm.Name, n, err)
							return
						}
						mine[i] = updated
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
		GinkgoWriter.Printf("%d updates in %v\n", updates, time.Since(start).Round(time.Millisecond))

		By("reconciling every object at its final state")
		want := map[reconcile.Request]int{}
		for _, k := range keys {
			want[k] = perObj
		}
		Eventually(ctx, tracker.seen).WithTimeout(time.Minute).Should(Equal(want))

		total := tracker.total.Load()
		AddReportEntry("reconciles", fmt.Sprintf("%d reconciles for %d updates of %d objects (max %d at once)",
			total, updates, objects, tracker.maxActive.Load()))
		GinkgoWriter.Printf("%d reconciles for %d updates of %d objects, at most %d at once\n", total, updates, objects, tracker.maxActive.Load())
		Expect(tracker.overlaps.Load()).To(BeZero(), "a key was reconciled by two workers at once")
		Expect(tracker.unexpected.Load()).To(BeZero(), "a key outside the namespace's ConfigMaps was reconciled")
		tracker.mu.Lock()
		regressions := tracker.regressions
		tracker.mu.Unlock()
		Expect(regressions).To(BeZero(), "a reconcile saw an older state than the key's reconcile before it")
		// Without parallelism the overlap check proves nothing.
		Expect(tracker.maxActive.Load()).To(BeNumerically(">", 1), "the 8 workers never ran two reconciles at once")

		By("accounting for every reconcile in the metrics")
		reg := mgr.Metrics()
		controller := map[string]string{"controller": "eight-workers"}
		Expect(metricValue(reg, "controller_runtime_max_concurrent_reconciles", controller)()).To(BeEquivalentTo(8))
		Expect(metricValue(reg, "controller_runtime_reconcile_total", map[string]string{"controller": "eight-workers", "result": "success"})()).
			To(BeEquivalentTo(total))
		Expect(metricValue(reg, "controller_runtime_active_workers", controller)()).To(BeZero())
		queue := map[string]string{"name": "eight-workers"}
		Expect(metricValue(reg, "workqueue_depth", queue)()).To(BeZero())
		// Each reconcile took a key that an add had made pending: with the
		// queue empty and no retries, adds and reconciles match.
		Expect(metricValue(reg, "workqueue_adds_total", queue)()).To(BeEquivalentTo(total))
		Expect(metricValue(reg, "workqueue_retries_total", queue)()).To(BeZero())
	}, SpecTimeout(3*time.Minute))

	It("reconcile a key that changed many times while it was held once more, at its latest state", func(ctx SpecContext) {
		const updates = 10
		mgr := newManager(ns, framework.Options{})
		release := make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		var (
			mu sync.Mutex
			// seen is data["v"] as each reconcile of the key saw it; mu guards it.
			seen []string
		)
		seenNow := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(seen)
		}
		// Two workers: one holds the key, the other is free to take it if the
		// queue handed a held key out again.
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "held", framework.ControllerOptions{Workers: 2}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				mu.Lock()
				seen = append(seen, cm.Data["v"])
				first := len(seen) == 1
				mu.Unlock()
				if first {
					select { // hold the key until the spec has changed the object many times
					case <-release:
					case <-ctx.Done():
					}
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		DeferCleanup(releaseOnce) // runs before the manager stops, should the spec fail early

		cm := createConfigMap(ctx, ns, "busy", map[string]string{"v": "0"})
		Eventually(ctx, seenNow).Should(Equal([]string{"0"}))
		By(fmt.Sprintf("updating the object %d times while its first reconcile runs", updates))
		for v := 1; v <= updates; v++ {
			cm.Data["v"] = strconv.Itoa(v)
			var err error
			cm, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(ctx, func() (string, error) {
			var cached corev1.ConfigMap
			err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "busy"}, &cached)
			return cached.Data["v"], err
		}).Should(Equal(strconv.Itoa(updates)), "the cache has the last update")
		Consistently(ctx, seenNow).WithTimeout(300*time.Millisecond).Should(HaveLen(1), "the held key was handed to the other worker")

		By("releasing the key")
		releaseOnce()
		Eventually(ctx, seenNow).Should(HaveLen(2))
		Consistently(ctx, func() int { return len(seenNow()) }).WithTimeout(500 * time.Millisecond).Should(BeNumerically("<=", 3))
		// The updates collapse into one reconcile at the last state. One more
		// may follow: the cache can hold the last update before the
		// controller's handler has been told of it (client-go notifies
		// handlers after storing), and that late notice queues the key again.
		// Without the collapse there would be one reconcile per update.
		got := seenNow()
		Expect(got[0]).To(Equal("0"))
		Expect(got[1:]).To(HaveEach(Equal(strconv.Itoa(updates))))
	}, SpecTimeout(time.Minute))
})
