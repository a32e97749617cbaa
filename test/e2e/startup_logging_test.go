package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
)

var _ = Describe("logging at the default verbosity", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("logs one line per controller when its caches have synced and its workers start, and nothing else while all is well", func(ctx SpecContext) {
		logs := &logCapture{} // verbosity 0: what a user sees by default
		mgr := newManager(ns, framework.Options{Logger: logs.logger()})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "configmaps", framework.ControllerOptions{Workers: 3}).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		Expect(framework.NewBuilder[*corev1.Secret](mgr, "secrets", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		startManager(ctx, mgr)
		createConfigMap(ctx, ns, "healthy", nil)
		Eventually(ctx, calls.count(key(ns, "healthy"))).Should(Equal(1))

		started := func(controller string, workers int) OmegaMatcher {
			return And(
				HaveKeyWithValue("msg", "controller started"),
				HaveKeyWithValue("controller", controller),
				HaveKeyWithValue("workers", BeEquivalentTo(workers)),
			)
		}
		Eventually(ctx, logs.all).Should(HaveLen(2))
		Consistently(ctx, logs.all).WithTimeout(time.Second).Should(ConsistOf(started("configmaps", 3), started("secrets", 1)))
	}, SpecTimeout(time.Minute))
})
