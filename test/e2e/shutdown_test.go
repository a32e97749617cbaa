package e2e_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// ending is how one reconcile ended: when it returned, its context's error at
// that moment (nil: it finished on its own) and its context's deadline (zero:
// none).
type ending struct {
	at       time.Time
	ctxErr   error
	deadline time.Time
}

// endings records how the reconciles of each key ended. Safe for concurrent use.
type endings struct {
	mu sync.Mutex
	// byKey holds the endings of each key in order; mu guards it.
	byKey map[reconcile.Request][]ending
}

func newEndings() *endings { return &endings{byKey: map[reconcile.Request][]ending{}} }

func (e *endings) record(ctx context.Context, req reconcile.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	deadline, _ := ctx.Deadline()
	e.byKey[req] = append(e.byKey[req], ending{at: time.Now(), ctxErr: ctx.Err(), deadline: deadline})
}

// of returns a function reporting the endings of req, for Eventually.
func (e *endings) of(req reconcile.Request) func() []ending {
	return func() []ending {
		e.mu.Lock()
		defer e.mu.Unlock()
		return append([]ending(nil), e.byKey[req]...)
	}
}

var _ = Describe("shutdown and timeouts", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("lets in-flight reconciles finish on shutdown, and cancels them after GracefulShutdownTimeout", func(ctx SpecContext) {
		const grace = 600 * time.Millisecond
		mgr := newManager(ns, framework.Options{GracefulShutdownTimeout: grace})
		calls, ends := newRecorder(), newEndings()
		finish := make(chan struct{})
		polite, stubborn := key(ns, "polite"), key(ns, "stubborn")
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "draining", framework.ControllerOptions{Workers: 2}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				calls.record(req)
				defer ends.record(ctx, req)
				switch req {
				case polite: // finishes when told to
					select {
					case <-finish:
					case <-ctx.Done():
					}
				case stubborn: // runs until its context is cancelled
					<-ctx.Done()
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		run := runManager(ctx, mgr)
		createConfigMap(ctx, ns, polite.Name, nil)
		createConfigMap(ctx, ns, stubborn.Name, nil)
		Eventually(ctx, calls.count(polite)).Should(Equal(1))
		Eventually(ctx, calls.count(stubborn)).Should(Equal(1))

		By("stopping the manager while both reconciles run")
		stopped := time.Now()
		run.cancel()
		Consistently(ctx, run.done).WithTimeout(grace/3).ShouldNot(BeClosed(), "Start returned before in-flight reconciles ended")
		close(finish)
		Eventually(ctx, ends.of(polite)).Should(HaveLen(1))
		Expect(ends.of(polite)()[0].ctxErr).NotTo(HaveOccurred(), "a reconcile that finished within the grace period had its context cancelled")

		Eventually(ctx, run.done).WithTimeout(grace + 10*time.Second).Should(BeClosed())
		Expect(run.err).NotTo(HaveOccurred())
		Expect(ends.of(stubborn)()).To(HaveLen(1))
		end := ends.of(stubborn)()[0]
		Expect(end.ctxErr).To(MatchError(context.Canceled))
		Expect(end.at.Sub(stopped)).To(BeNumerically(">=", grace), "the stubborn reconcile was cancelled before the grace period ended")
		Expect(end.at.Sub(stopped)).To(BeNumerically("<", grace+5*time.Second))
	}, SpecTimeout(time.Minute))

	It("cancels in-flight reconciles at once when GracefulShutdownTimeout is negative", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{GracefulShutdownTimeout: -1})
		calls, ends := newRecorder(), newEndings()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "impatient", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				calls.record(req)
				defer ends.record(ctx, req)
				<-ctx.Done()
				return reconcile.Result{}, nil
			}))).To(Succeed())
		run := runManager(ctx, mgr)
		k := key(ns, "stubborn")
		createConfigMap(ctx, ns, k.Name, nil)
		Eventually(ctx, calls.count(k)).Should(Equal(1))

		stopped := time.Now()
		run.cancel()
		Eventually(ctx, run.done).Should(BeClosed())
		Expect(run.err).NotTo(HaveOccurred())
		Expect(ends.of(k)()).To(HaveLen(1))
		end := ends.of(k)()[0]
		Expect(end.ctxErr).To(MatchError(context.Canceled))
		// At once: well before the default grace period of 30 s.
		Expect(end.at.Sub(stopped)).To(BeNumerically("<", 5*time.Second), "the in-flight reconcile was not cancelled at once")
	}, SpecTimeout(time.Minute))

	It("cancels a reconcile that runs past ReconcileTimeout, counts it and retries it", func(ctx SpecContext) {
		const timeout = 200 * time.Millisecond
		mgr := newManager(ns, framework.Options{})
		calls, ends := newRecorder(), newEndings()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "bounded", framework.ControllerOptions{ReconcileTimeout: timeout}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				defer ends.record(ctx, req)
				if calls.record(req) == 1 {
					<-ctx.Done() // stuck until the timeout
					return reconcile.Result{}, ctx.Err()
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		k := key(ns, "slow")
		createConfigMap(ctx, ns, k.Name, nil)

		Eventually(ctx, ends.of(k)).Should(HaveLen(2), "the timed-out reconcile was not retried")
		first, second := ends.of(k)()[0], ends.of(k)()[1]
		Expect(errors.Is(first.ctxErr, context.DeadlineExceeded)).To(BeTrue(), "the first reconcile ended with context error %v", first.ctxErr)
		// The deadline is set just before the reconcile is called, so it lies
		// at most timeout after the reconcile's first line; and the context
		// was not cancelled before it.
		Expect(first.deadline.Sub(calls.times(k)[0])).To(BeNumerically("<=", timeout))
		Expect(first.at.Before(first.deadline)).To(BeFalse(), "the reconcile was cancelled before its deadline")
		Expect(second.ctxErr).NotTo(HaveOccurred())

		labels := map[string]string{"controller": "bounded"}
		Expect(metricValue(mgr.Metrics(), "converge_reconcile_timeouts_total", labels)()).To(BeEquivalentTo(1))
		Expect(metricValue(mgr.Metrics(), "controller_runtime_reconcile_total", map[string]string{"controller": "bounded", "result": "error"})()).
			To(BeEquivalentTo(1))
	}, SpecTimeout(time.Minute))
})
