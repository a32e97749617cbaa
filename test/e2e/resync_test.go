package e2e_test

import (
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
)

var _ = Describe("ResyncPeriod", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reconciles a controller's objects again without changes, as background work, and leaves other controllers of the kind alone", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		resynced, quiet := newRecorder(), newRecorder()
		var (
			mu sync.Mutex
			// replays counts the resync events the predicate saw, by
			// whether they were marked Replay; changes counts real
			// updates likewise. mu guards both.
			replays = map[bool]int{}
			changes = map[bool]int{}
		)
		see := func(e framework.Change[*corev1.ConfigMap]) bool {
			if e.Type == framework.Updated {
				mu.Lock()
				defer mu.Unlock()
				if e.Old.ResourceVersion == e.Object.ResourceVersion {
					replays[e.Replay]++
				} else {
					changes[e.Replay]++
				}
			}
			return true
		}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "resynced", framework.ControllerOptions{ResyncPeriod: time.Second}).
			WithPredicates(see).
			CompleteByKey(countingReconciler(resynced))).To(Succeed())
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "quiet", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(quiet))).To(Succeed())
		startManager(ctx, mgr)

		cm := createConfigMap(ctx, ns, "steady", map[string]string{"v": "1"})
		Eventually(ctx, quiet.count(key(ns, "steady"))).Should(Equal(1))
		Eventually(ctx, resynced.count(key(ns, "steady"))).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 4))
		Expect(quiet.count(key(ns, "steady"))()).To(Equal(1), "a controller without ResyncPeriod reconciled an unchanged object again")
		Consistently(ctx, quiet.count(key(ns, "steady"))).WithTimeout(1500 * time.Millisecond).Should(Equal(1))

		By("a real change meanwhile is foreground work")
		cm.Data["v"] = "2"
		_, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, quiet.count(key(ns, "steady"))).Should(Equal(2))
		Eventually(ctx, func() int { mu.Lock(); defer mu.Unlock(); return changes[false] }).Should(Equal(1))

		mu.Lock()
		defer mu.Unlock()
		Expect(replays[true]).To(BeNumerically(">=", 3), "resync replays marked Replay")
		Expect(replays[false]).To(BeZero(), "resync replays not marked Replay")
		Expect(changes[true]).To(BeZero(), "real changes marked Replay")
	}, SpecTimeout(2*time.Minute))
})
