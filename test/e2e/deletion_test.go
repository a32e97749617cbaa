package e2e_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// deletionRecorder is an ObjectReconciler that is also a DeletionReconciler:
// it records the data["v"] of every ConfigMap it is handed and every tombstone.
type deletionRecorder struct {
	mu sync.Mutex
	// seen is data["v"] per reconcile of a live object, and tombstones every
	// deletion reported; mu guards both.
	seen       map[reconcile.Request][]string
	tombstones []reconcile.Tombstone[*corev1.ConfigMap]
}

var (
	_ reconcile.ObjectReconciler[*corev1.ConfigMap]   = (*deletionRecorder)(nil)
	_ reconcile.DeletionReconciler[*corev1.ConfigMap] = (*deletionRecorder)(nil)
)

func (r *deletionRecorder) Reconcile(_ context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(cm.Namespace, cm.Name)
	r.seen[k] = append(r.seen[k], cm.Data["v"])
	return reconcile.Result{}, nil
}

func (r *deletionRecorder) ReconcileDeleted(_ context.Context, gone reconcile.Tombstone[*corev1.ConfigMap]) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tombstones = append(r.tombstones, gone)
	return reconcile.Result{}, nil
}

// lastSeen returns data["v"] as the last reconcile of k saw it.
func (r *deletionRecorder) lastSeen(k reconcile.Request) func() string {
	return func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		if s := r.seen[k]; len(s) > 0 {
			return s[len(s)-1]
		}
		return ""
	}
}

// count returns how many times a live k was reconciled.
func (r *deletionRecorder) count(k reconcile.Request) func() int {
	return func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.seen[k])
	}
}

// deleted returns the tombstones reported so far.
func (r *deletionRecorder) deleted() []reconcile.Tombstone[*corev1.ConfigMap] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reconcile.Tombstone[*corev1.ConfigMap](nil), r.tombstones...)
}

var _ = Describe("a DeletionReconciler", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("is handed a tombstone with the object's last state once it is deleted", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		r := &deletionRecorder{seen: map[reconcile.Request][]string{}}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "tombstones", framework.ControllerOptions{}).
			Complete(r)).To(Succeed())
		startManager(ctx, mgr)

		k := key(ns, "doomed")
		cm := createConfigMap(ctx, ns, k.Name, map[string]string{"v": "1"})
		Eventually(ctx, r.lastSeen(k)).Should(Equal("1"))
		cm.Data["v"] = "2"
		cm, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, r.lastSeen(k)).Should(Equal("2"))
		Expect(r.deleted()).To(BeEmpty())

		live := r.count(k)()
		Expect(kube.CoreV1().ConfigMaps(ns).Delete(ctx, k.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, r.deleted).Should(HaveLen(1))
		gone := r.deleted()[0]
		Expect(gone.Request).To(Equal(k))
		Expect(gone.Last).NotTo(BeNil(), "the tombstone lacks the last state")
		Expect(gone.Last.Data).To(HaveKeyWithValue("v", "2"))
		Expect(gone.Last.UID).To(Equal(cm.UID))

		// The deletion is reported once, and the live reconciler is not
		// called for the deleted key.
		Consistently(ctx, r.deleted).WithTimeout(500 * time.Millisecond).Should(HaveLen(1))
		Expect(r.count(k)()).To(Equal(live))
	}, SpecTimeout(time.Minute))

	It("is told of a deletion even when an object of the same name replaces it before the reconcile", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		r := &deletionRecorder{seen: map[reconcile.Request][]string{}}
		release := make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		gate := key(ns, "gate")
		// One worker, held by the gate's reconcile while the spec deletes and
		// re-creates the object, so the deletion and the re-creation reach
		// the queue before the object's reconcile runs.
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "replaced", framework.ControllerOptions{Workers: 1}).
			Complete(&gatedDeletionRecorder{deletionRecorder: r, gate: gate, release: release})).To(Succeed())
		startManager(ctx, mgr)
		DeferCleanup(releaseOnce) // runs before the manager stops, should the spec fail early
		cms := kube.CoreV1().ConfigMaps(ns)

		k := key(ns, "replaced")
		old := createConfigMap(ctx, ns, k.Name, map[string]string{"v": "old"})
		Eventually(ctx, r.lastSeen(k)).Should(Equal("old"))

		By("holding the only worker, then replacing the object")
		createConfigMap(ctx, ns, gate.Name, nil)
		Eventually(ctx, r.count(gate)).Should(Equal(1))
		Expect(cms.Delete(ctx, k.Name, metav1.DeleteOptions{})).To(Succeed())
		replacement := createConfigMap(ctx, ns, k.Name, map[string]string{"v": "new"})
		Expect(replacement.UID).NotTo(Equal(old.UID))
		Eventually(ctx, func() (types.UID, error) {
			var cached corev1.ConfigMap
			err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: k.Name}, &cached)
			return cached.UID, err
		}).Should(Equal(replacement.UID))

		By("releasing the worker")
		releaseOnce()
		Eventually(ctx, r.lastSeen(k)).Should(Equal("new"))
		Eventually(ctx, r.deleted).Should(HaveLen(1), "the replaced object's deletion was never reported")
		Expect(r.deleted()[0].Last.UID).To(Equal(old.UID))
	}, SpecTimeout(time.Minute))
	It("is handed the tombstone again when ReconcileDeleted asks for a RequeueAfter", func(ctx SpecContext) {
		const after = 200 * time.Millisecond
		mgr := newManager(ns, framework.Options{})
		r := &requeueingDeletionRecorder{deletionRecorder: &deletionRecorder{seen: map[reconcile.Request][]string{}}, after: after}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "polling-cleanup", framework.ControllerOptions{}).
			Complete(r)).To(Succeed())
		startManager(ctx, mgr)

		k := key(ns, "cleaned-up")
		createConfigMap(ctx, ns, k.Name, map[string]string{"v": "1"})
		Eventually(ctx, r.lastSeen(k)).Should(Equal("1"))
		Expect(kube.CoreV1().ConfigMaps(ns).Delete(ctx, k.Name, metav1.DeleteOptions{})).To(Succeed())

		// The first call asks to be called again (an external cleanup still
		// in progress, say); the outcome table promises the key runs again
		// after RequeueAfter, and for a deleted object that means the
		// DeletionReconciler, with the same tombstone.
		Eventually(ctx, r.deleted).WithTimeout(after+10*time.Second).Should(HaveLen(2), "ReconcileDeleted was not called again after its RequeueAfter")
		first, second := r.deleted()[0], r.deleted()[1]
		Expect(second.Request).To(Equal(k))
		Expect(second.Last).To(BeIdenticalTo(first.Last))
	}, SpecTimeout(time.Minute))
})

// gatedDeletionRecorder is a deletionRecorder whose reconcile of the gate
// key blocks until release is closed.
type gatedDeletionRecorder struct {
	*deletionRecorder
	gate    reconcile.Request
	release <-chan struct{}
}

func (g *gatedDeletionRecorder) Reconcile(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
	res, err := g.deletionRecorder.Reconcile(ctx, cm)
	if key(cm.Namespace, cm.Name) == g.gate {
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return res, err
}

// requeueingDeletionRecorder is a deletionRecorder whose first ReconcileDeleted
// of each key asks to be called again after a while.
type requeueingDeletionRecorder struct {
	*deletionRecorder
	after time.Duration
}

func (r *requeueingDeletionRecorder) ReconcileDeleted(ctx context.Context, gone reconcile.Tombstone[*corev1.ConfigMap]) (reconcile.Result, error) {
	res, err := r.deletionRecorder.ReconcileDeleted(ctx, gone)
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := 0
	for _, t := range r.tombstones {
		if t.Request == gone.Request {
			calls++
		}
	}
	if calls == 1 {
		return reconcile.Result{RequeueAfter: r.after}, err
	}
	return res, err
}
