package e2e_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// leaseTiming is the timing of one election. Both specs' timings satisfy the
// framework's rules (LeaseDuration > RenewDeadline > 1.2 × RetryPeriod).
type leaseTiming struct{ leaseDuration, renewDeadline, retryPeriod time.Duration }

var (
	// handover leaves a loaded machine seconds to renew and to release the
	// lease, so that only a lease that was not released makes the standby
	// wait (LeaseDuration) before it takes over.
	handover = leaseTiming{leaseDuration: 10 * time.Second, renewDeadline: 5 * time.Second, retryPeriod: 250 * time.Millisecond}
	// losing makes a leader whose lease was taken give up within seconds.
	losing = leaseTiming{leaseDuration: 4 * time.Second, renewDeadline: 2 * time.Second, retryPeriod: 250 * time.Millisecond}
)

// electing returns manager options that join the election for lease ns/id as identity.
func electing(ns, id, identity string, t leaseTiming) framework.Options {
	return framework.Options{LeaderElection: framework.LeaderElectionOptions{
		Enabled: true, ID: id, Namespace: ns, Identity: identity,
		LeaseDuration: t.leaseDuration, RenewDeadline: t.renewDeadline, RetryPeriod: t.retryPeriod,
	}}
}

var _ = Describe("leader election", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("runs controllers in the leader only, and hands over to a standby at once when the leader stops", func(ctx SpecContext) {
		const lease = "e2e-handover"
		leader, standby := newManager(ns, electing(ns, lease, "first", handover)), newManager(ns, electing(ns, lease, "second", handover))
		leaderCalls, standbyCalls := newRecorder(), newRecorder()
		Expect(framework.NewController[*corev1.ConfigMap](leader, "elected", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(leaderCalls))).To(Succeed())
		Expect(framework.NewController[*corev1.ConfigMap](standby, "elected", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(standbyCalls))).To(Succeed())

		first := runManager(ctx, leader)
		one := key(ns, "one")
		createConfigMap(ctx, ns, one.Name, nil)
		Eventually(ctx, leaderCalls.count(one)).Should(Equal(1))
		Eventually(ctx, metricValue(leader.Metrics(), "leader_election_master_status", map[string]string{"name": lease})).Should(BeEquivalentTo(1))

		By("starting a standby: it keeps its cache warm but reconciles nothing")
		startManager(ctx, standby)
		two := key(ns, "two")
		createConfigMap(ctx, ns, two.Name, nil)
		Eventually(ctx, leaderCalls.count(two)).Should(Equal(1))
		Consistently(ctx, standbyCalls.keys).WithTimeout(time.Second).Should(BeEmpty())

		By("stopping the leader: it releases the lease, so the standby need not wait for it to expire")
		stopped := time.Now()
		first.cancel()
		Eventually(ctx, first.done).Should(BeClosed())
		Expect(first.err).NotTo(HaveOccurred())
		Eventually(ctx, standbyCalls.keys).WithTimeout(2 * handover.leaseDuration).Should(ConsistOf(one, two))
		takeover := standbyCalls.times(one)[0].Sub(stopped)
		GinkgoWriter.Printf("the standby reconciled %v after the leader was told to stop\n", takeover)
		Expect(takeover).To(BeNumerically("<", handover.leaseDuration), "the standby waited for the lease to expire: was it released?")
	}, SpecTimeout(time.Minute))

	It("returns ErrLeaderElectionLost and cancels in-flight reconciles at once when the lease is taken away", func(ctx SpecContext) {
		const lease = "e2e-lost"
		mgr := newManager(ns, electing(ns, lease, "victim", losing))
		calls, ends := newRecorder(), newEndings()
		Expect(framework.NewController[*corev1.ConfigMap](mgr, "dethroned", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				calls.record(req)
				defer ends.record(ctx, req)
				<-ctx.Done() // in flight until cancelled
				return reconcile.Result{}, nil
			}))).To(Succeed())
		run := runManager(ctx, mgr)
		k := key(ns, "busy")
		createConfigMap(ctx, ns, k.Name, nil)
		Eventually(ctx, calls.count(k)).Should(Equal(1))

		By("another process taking the lease")
		leases := kube.CoordinationV1().Leases(ns)
		var taken time.Time
		Eventually(ctx, func() error {
			l, err := leases.Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.NewMicroTime(time.Now())
			thief, forAMinute := "thief", int32(60)
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &thief, &forAMinute
			l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{}) // conflicts with a renewal are retried
			taken = time.Now()
			return err
		}).Should(Succeed())

		Eventually(ctx, run.done).WithTimeout(losing.renewDeadline + 10*time.Second).Should(BeClosed())
		Expect(run.err).To(MatchError(framework.ErrLeaderElectionLost))
		lostAfter := time.Since(taken)
		GinkgoWriter.Printf("Start returned %v after the lease was taken\n", lostAfter)
		Expect(lostAfter).To(BeNumerically("<", losing.renewDeadline+5*time.Second))
		// The default GracefulShutdownTimeout (30s) does not apply: another
		// process may be reconciling the same keys already.
		Expect(ends.of(k)()).To(HaveLen(1))
		Expect(ends.of(k)()[0].ctxErr).To(MatchError(context.Canceled))
		Expect(ends.of(k)()[0].at.Sub(taken)).To(BeNumerically("<", losing.renewDeadline+5*time.Second))
	}, SpecTimeout(time.Minute))
})
