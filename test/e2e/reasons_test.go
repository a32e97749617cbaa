package e2e_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

var _ = Describe("reconcile reasons", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reports replay for the initial list, change for an update, retry after a failure and requeue after RequeueAfter, in ReasonFrom, the logs and converge_reconciles_total", func(ctx SpecContext) {
		cm := createConfigMap(ctx, ns, "listed", map[string]string{"v": "1"}) // before the manager: in its initial list
		logs := &logCapture{}
		mgr := newManager(ns, framework.Options{Logger: logs.logger()})
		var (
			mu sync.Mutex
			// seen holds the reason of each reconcile of the object, in
			// order; mu guards it.
			seen                  []reconcile.Reason
			failNext, requeueNext atomic.Bool
		)
		reasons := func() []reconcile.Reason {
			mu.Lock()
			defer mu.Unlock()
			return append([]reconcile.Reason(nil), seen...)
		}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "reasons", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				mu.Lock()
				seen = append(seen, framework.ReasonFrom(ctx))
				mu.Unlock()
				logr.FromContextOrDiscard(ctx).Info("reconciling")
				if failNext.CompareAndSwap(true, false) {
					return reconcile.Result{}, errors.New("fails once")
				}
				if requeueNext.CompareAndSwap(true, false) {
					return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		update := func(v string) {
			GinkgoHelper()
			cm.Data["v"] = v
			var err error
			cm, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred(), "update ConfigMap %s/%s", ns, cm.Name)
		}

		By("the initial list is a replay")
		Eventually(ctx, reasons).WithTimeout(30 * time.Second).Should(Equal([]reconcile.Reason{reconcile.ReasonReplay}))

		By("an update is a change")
		update("2")
		Eventually(ctx, reasons).WithTimeout(30 * time.Second).Should(Equal([]reconcile.Reason{
			reconcile.ReasonReplay, reconcile.ReasonChange}))

		By("the retry of a failed reconcile is a retry, not a change")
		failNext.Store(true)
		update("3")
		Eventually(ctx, reasons).WithTimeout(30 * time.Second).Should(Equal([]reconcile.Reason{
			reconcile.ReasonReplay, reconcile.ReasonChange,
			reconcile.ReasonChange, reconcile.ReasonRetry}))

		By("the reconcile RequeueAfter asks for is a requeue")
		requeueNext.Store(true)
		update("4")
		want := []reconcile.Reason{
			reconcile.ReasonReplay, reconcile.ReasonChange,
			reconcile.ReasonChange, reconcile.ReasonRetry,
			reconcile.ReasonChange, reconcile.ReasonRequeue}
		Eventually(ctx, reasons).WithTimeout(30 * time.Second).Should(Equal(want))

		By("each reconcile's log lines carry its reason, the failure's too")
		var logged []any
		for _, l := range logs.with("msg", "reconciling")() {
			if l["name"] == "listed" {
				logged = append(logged, l["reason"])
			}
		}
		Expect(logged).To(HaveExactElements("replay", "change", "change", "retry", "change", "requeue"))
		failures := logs.with("msg", "reconcile failed; retrying with backoff")()
		Expect(failures).To(HaveLen(1))
		Expect(failures[0]).To(HaveKeyWithValue("reason", "change"))

		By("converge_reconciles_total counts reconciles by reason")
		for reason, n := range map[string]int{"replay": 1, "change": 3, "retry": 1, "requeue": 1} {
			Eventually(ctx, metricValue(mgr.Metrics(), "converge_reconciles_total", map[string]string{"controller": "reasons", "reason": reason})).
				WithTimeout(30*time.Second).Should(BeEquivalentTo(n), "reason %s", reason)
		}
	})
})
