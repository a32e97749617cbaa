package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// These specs check the outcome table of the reconcile package documentation
// against a running controller: what the controller does with each (Result,
// error) a reconcile returns, and with a panic.
var _ = Describe("reconcile outcomes", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("honours RequeueAfter without any change to the object", func(ctx SpecContext) {
		const after = 300 * time.Millisecond
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "requeue-after", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				if calls.record(req) == 1 {
					return reconcile.Result{RequeueAfter: after}, nil
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)

		createConfigMap(ctx, ns, "timer", nil)
		k := key(ns, "timer")
		Eventually(ctx, calls.count(k)).Should(Equal(2))
		times := calls.times(k)
		GinkgoWriter.Printf("second reconcile %v after the first\n", times[1].Sub(times[0]))
		Expect(times[1].Sub(times[0])).To(BeNumerically(">=", after), "the requeue came early")
		Expect(times[1].Sub(times[0])).To(BeNumerically("<", after+2*time.Second), "the requeue came very late")
		// The second reconcile returned the zero Result: no more timed requeues.
		Consistently(ctx, calls.count(k)).WithTimeout(2 * after).Should(Equal(2))
		Expect(calls.keys()).To(ConsistOf(k))
	}, SpecTimeout(time.Minute))

	It("retries errors with a growing backoff, and retries a terminal error only after a change", func(ctx SpecContext) {
		// The default rate limiter waits 5ms·2^n before the n-th retry of a
		// key (n from 0), so the gaps between the attempts of a key that
		// fails 6 times are at least 5, 10, 20, 40, 80 and 160 ms.
		const failures = 6
		const base = 5 * time.Millisecond
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "backoff", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				attempt := calls.record(req)
				switch req.Name {
				case "flaky":
					if attempt <= failures {
						return reconcile.Result{}, fmt.Errorf("attempt %d: the outside world is not ready", attempt)
					}
					return reconcile.Result{}, nil
				case "invalid":
					return reconcile.Result{}, fmt.Errorf("validate: %w", reconcile.Terminal(errors.New("spec.size must be positive")))
				}
				return reconcile.Result{}, fmt.Errorf("unexpected key %v", req)
			}))).To(Succeed())
		startManager(ctx, mgr)

		flaky, invalid := key(ns, "flaky"), key(ns, "invalid")
		createConfigMap(ctx, ns, flaky.Name, nil)
		createConfigMap(ctx, ns, invalid.Name, nil)

		By("retrying a failing key until it succeeds")
		Eventually(ctx, calls.count(flaky)).Should(Equal(failures + 1))
		got := gaps(calls.times(flaky))
		GinkgoWriter.Printf("gaps between attempts: %v\n", got)
		Expect(got).To(HaveLen(failures))
		for i, gap := range got {
			want := base << i
			// Never earlier than the backoff; later only by scheduling noise
			// (a few ms on a quiet machine; the bound leaves room for a
			// loaded one).
			Expect(gap).To(BeNumerically(">=", want), "gap %d came before its backoff of %v", i, want)
			Expect(gap).To(BeNumerically("<", want+time.Second), "gap %d is far beyond its backoff of %v", i, want)
		}
		// The bounds above would also let a constant backoff of ~200ms through;
		// a doubling one makes the last gap 32 times the first.
		Expect(got[failures-1]).To(BeNumerically(">", 2*got[0]), "the backoff does not grow")

		By("not retrying a terminal error, nor a key that succeeded")
		Expect(calls.count(invalid)()).To(Equal(1))
		Consistently(ctx, func() []int {
			return []int{calls.count(flaky)(), calls.count(invalid)()}
		}).WithTimeout(time.Second).Should(Equal([]int{failures + 1, 1}))

		By("retrying a terminal error once the object changes")
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, invalid.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		cm.Data = map[string]string{"size": "-1"}
		_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(invalid)).Should(Equal(2))

		By("counting each outcome")
		labels := func(result string) map[string]string {
			return map[string]string{"controller": "backoff", "result": result}
		}
		reg := mgr.Metrics()
		// As in controller-runtime, terminal errors count as result="error"
		// and also in a series of their own.
		Expect(metricValue(reg, "controller_runtime_reconcile_total", labels("error"))()).To(BeEquivalentTo(failures + 2))
		Expect(metricValue(reg, "controller_runtime_reconcile_total", labels("success"))()).To(BeEquivalentTo(1))
		Expect(metricValue(reg, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "backoff"})()).
			To(BeEquivalentTo(failures + 2))
		Expect(metricValue(reg, "controller_runtime_terminal_reconcile_errors_total", map[string]string{"controller": "backoff"})()).
			To(BeEquivalentTo(2))
	}, SpecTimeout(time.Minute))

	It("recovers from a panicking reconciler and keeps the manager running", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		succeeded := newRecorder()
		// One worker: if a panic killed it, nothing would be reconciled again.
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "panicky", framework.ControllerOptions{Workers: 1}).
			CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				if calls.record(req) == 1 {
					panic(fmt.Sprintf("first look at %v", req))
				}
				succeeded.record(req)
				return reconcile.Result{}, nil
			}))).To(Succeed())
		run := startManager(ctx, mgr)

		boom := key(ns, "boom")
		createConfigMap(ctx, ns, boom.Name, nil)
		By("retrying the key that panicked")
		Eventually(ctx, succeeded.count(boom)).Should(Equal(1))
		Expect(calls.count(boom)()).To(Equal(2))
		Eventually(ctx, metricValue(mgr.Metrics(), "controller_runtime_reconcile_panics_total", map[string]string{"controller": "panicky"})).
			Should(BeNumerically(">=", 1))

		By("reconciling new keys after the panic")
		Expect(run.done).NotTo(BeClosed(), "Manager.Start returned after a reconcile panicked")
		later := key(ns, "later")
		createConfigMap(ctx, ns, later.Name, nil)
		Eventually(ctx, succeeded.count(later)).Should(Equal(1))
		Expect(run.done).NotTo(BeClosed(), "Manager.Start returned after a reconcile panicked")
	}, SpecTimeout(time.Minute))
})
