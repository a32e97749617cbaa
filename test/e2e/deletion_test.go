package e2e_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		Expect(framework.NewController[*corev1.ConfigMap](mgr, "tombstones", framework.ControllerOptions{}).
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
})
