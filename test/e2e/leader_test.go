package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
)

// leaseTiming is the timing of one election. Both specs' timings satisfy the
// framework's rules (Lease.Duration > RenewDeadline > 1.2 × RetryPeriod).
type leaseTiming struct{ leaseDuration, renewDeadline, retryPeriod time.Duration }

var (
	// handover leaves a loaded machine seconds to renew and to release the
	// lease, so that only a lease that was not released makes the standby
	// wait (Lease.Duration) before it takes over.
	handover = leaseTiming{leaseDuration: 10 * time.Second, renewDeadline: 5 * time.Second, retryPeriod: 250 * time.Millisecond}
	// losing makes a leader whose lease was taken give up within seconds.
	losing = leaseTiming{leaseDuration: 4 * time.Second, renewDeadline: 2 * time.Second, retryPeriod: 250 * time.Millisecond}
)

// electing returns manager options that join the election for lease ns/id as identity.
func electing(ns, id, identity string, t leaseTiming) framework.Options {
	return framework.Options{LeaderElection: framework.LeaderElectionOptions{
		Enabled: true,
		ID:      id,
		Lease:   lease.Options{Namespace: ns, Identity: identity, Duration: t.leaseDuration, RenewDeadline: t.renewDeadline, RetryPeriod: t.retryPeriod},
	}}
}

// spans records when each reconcile of each key began and ended, in every
// manager of a spec, to check that no two reconciles of one key ever ran at
// the same time, even in two processes. Safe for concurrent use.
type spans struct {
	mu sync.Mutex
	// byKey holds each key's reconciles in the order they began; mu guards it.
	byKey map[reconcile.Request][]*span
}

// span is one reconcile.
type span struct {
	who        string // the manager that ran it
	begin, end time.Time
	// ctxErr is the reconcile's context error when it ended: nil when it
	// finished its work.
	ctxErr error
}

func newSpans() *spans { return &spans{byKey: map[reconcile.Request][]*span{}} }

// reconciler returns a reconciler for the manager who that records its
// reconciles and works for work on each (less when its context ends).
func (s *spans) reconciler(who string, work time.Duration) reconcile.Func {
	return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		sp := &span{who: who, begin: time.Now()}
		s.mu.Lock()
		s.byKey[req] = append(s.byKey[req], sp)
		s.mu.Unlock()
		// Stand-in for the I/O of a real reconcile; the workload under
		// test, not the test waiting for something.
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		sp.end, sp.ctxErr = time.Now(), ctx.Err()
		s.mu.Unlock()
		return reconcile.Result{}, nil
	}
}

// of returns copies of the spans of who.
func (s *spans) of(who string) []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []span
	for _, list := range s.byKey {
		for _, sp := range list {
			if sp.who == who {
				out = append(out, *sp)
			}
		}
	}
	return out
}

// keysOf returns a function reporting the keys who has reconciled.
func (s *spans) keysOf(who string) func() []reconcile.Request {
	return func() []reconcile.Request {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []reconcile.Request
		for k, list := range s.byKey {
			if slices.ContainsFunc(list, func(sp *span) bool { return sp.who == who }) {
				out = append(out, k)
			}
		}
		return out
	}
}

// running returns a function reporting how many reconciles who runs now.
func (s *spans) running(who string) func() int {
	return func() int {
		n := 0
		for _, sp := range s.of(who) {
			if sp.end.IsZero() {
				n++
			}
		}
		return n
	}
}

// firstBegin returns when who began its first reconcile.
func (s *spans) firstBegin(who string) time.Time {
	var first time.Time
	for _, sp := range s.of(who) {
		if first.IsZero() || sp.begin.Before(first) {
			first = sp.begin
		}
	}
	return first
}

// overlaps describes every pair of reconciles of one key that ran at the
// same time; a reconcile still running counts as running forever.
func (s *spans) overlaps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, list := range s.byKey {
		for i, a := range list {
			for _, b := range list[i+1:] {
				aEnds, bEnds := a.end, b.end
				if (aEnds.IsZero() || b.begin.Before(aEnds)) && (bEnds.IsZero() || a.begin.Before(bEnds)) {
					out = append(out, fmt.Sprintf("%v: %s [%s, %s] and %s [%s, %s]", k,
						a.who, a.begin.Format(time.StampMilli), aEnds.Format(time.StampMilli),
						b.who, b.begin.Format(time.StampMilli), bEnds.Format(time.StampMilli)))
				}
			}
		}
	}
	return out
}

var _ = Describe("leader election", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("runs controllers in the leader only, hands over to a warm standby at once when the leader stops, and never lets both reconcile a key at once", func(ctx SpecContext) {
		const (
			lease   = "e2e-handover"
			workers = 4
			// work is how long each reconcile takes, so that the leader has
			// reconciles in flight when it is told to stop.
			work = 500 * time.Millisecond
		)
		leader, standby := newManager(ns, electing(ns, lease, "first", handover)), newManager(ns, electing(ns, lease, "second", handover))
		log := newSpans()
		for _, m := range []struct {
			mgr *framework.Manager
			id  string
		}{{leader, "first"}, {standby, "second"}} {
			Expect(framework.NewBuilder[*corev1.ConfigMap](m.mgr, "elected", framework.ControllerOptions{Workers: workers}).
				CompleteByKey(log.reconciler(m.id, work))).To(Succeed())
		}

		first := runManager(ctx, leader)
		keys := make([]reconcile.Request, 6)
		for i := range keys {
			keys[i] = key(ns, fmt.Sprintf("cm-%d", i))
			createConfigMap(ctx, ns, keys[i].Name, nil)
		}
		Eventually(ctx, log.keysOf("first")).Should(ConsistOf(keys))
		Eventually(ctx, metricValue(leader.Metrics(), "leader_election_master_status", map[string]string{"name": lease})).Should(BeEquivalentTo(1))

		By("starting a standby: it syncs its cache but reconciles nothing")
		startManager(ctx, standby)
		Eventually(ctx, standby.Cache().Health).Should(Succeed(), "the standby's cache is not warm")
		Consistently(ctx, log.keysOf("second")).WithTimeout(time.Second).Should(BeEmpty())
		Expect(metricValue(standby.Metrics(), "leader_election_master_status", map[string]string{"name": lease})()).To(BeEquivalentTo(0))

		By("changing every key, then stopping the leader while it reconciles them")
		for _, k := range keys {
			_, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Name}, Data: map[string]string{"changed": "yes"},
			}, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(ctx, log.running("first")).Should(Equal(workers), "the leader never had all its workers busy")
		stopped := time.Now()
		first.cancel()
		Eventually(ctx, first.done).Should(BeClosed())
		Expect(first.err).NotTo(HaveOccurred())
		Eventually(ctx, log.keysOf("second")).WithTimeout(2 * handover.leaseDuration).Should(ConsistOf(keys))

		takeover, afterRelease := log.firstBegin("second").Sub(stopped), log.firstBegin("second").Sub(first.returned)
		GinkgoWriter.Printf("takeover: the standby reconciled %v after the leader was told to stop, %v after the leader released the lease\n",
			takeover.Round(time.Millisecond), afterRelease.Round(time.Millisecond))
		AddReportEntry("leader takeover after stop", takeover.Round(time.Millisecond).String())
		AddReportEntry("leader takeover after lease release", afterRelease.Round(time.Millisecond).String())
		Expect(takeover).To(BeNumerically("<", handover.leaseDuration), "the standby waited for the lease to expire: was it released?")

		By("checking that the reconciles of each key never overlapped, across both managers")
		Expect(log.overlaps()).To(BeEmpty())
		for _, sp := range log.of("first") {
			Expect(sp.begin).To(BeTemporally("<", stopped), "the leader began a reconcile after it was told to stop")
			Expect(sp.ctxErr).NotTo(HaveOccurred(), "the leader's in-flight reconcile was cancelled instead of drained")
			Expect(sp.end).To(BeTemporally("<", log.firstBegin("second")), "the standby reconciled while the old leader still did")
		}
	}, SpecTimeout(time.Minute))

	It("returns ErrLeaderElectionLost and cancels in-flight reconciles at once when the lease is taken away", func(ctx SpecContext) {
		const lease = "e2e-lost"
		mgr := newManager(ns, electing(ns, lease, "victim", losing))
		calls, ends := newRecorder(), newEndings()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "dethroned", framework.ControllerOptions{}).
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
		taken := stealLease(ctx, ns, lease)

		Eventually(ctx, run.done).WithTimeout(losing.renewDeadline + 10*time.Second).Should(BeClosed())
		Expect(run.err).To(MatchError(framework.ErrLeaderElectionLost))
		lostAfter := run.returned.Sub(taken)
		GinkgoWriter.Printf("Start returned %v after the lease was taken\n", lostAfter)
		AddReportEntry("leadership lost after the lease was taken", lostAfter.Round(time.Millisecond).String())
		// The leader notices at its next renewal (RetryPeriod at most), then
		// retries until RenewDeadline has passed since its last renewal; the
		// margin is for a loaded machine.
		bound := losing.renewDeadline + losing.retryPeriod + 1500*time.Millisecond
		Expect(lostAfter).To(BeNumerically("<", bound), "Start returned ErrLeaderElectionLost later than RenewDeadline allows")
		// The default GracefulShutdownTimeout (30s) does not apply: another
		// process may be reconciling the same keys already.
		Expect(ends.of(k)()).To(HaveLen(1))
		Expect(ends.of(k)()[0].ctxErr).To(MatchError(context.Canceled))
		Expect(ends.of(k)()[0].at.Sub(taken)).To(BeNumerically("<", bound), "the in-flight reconcile outlived the leadership")
		Expect(ends.of(k)()[0].at).To(BeTemporally("<=", run.returned), "Start returned before the workers stopped")
	}, SpecTimeout(time.Minute))

	It("refuses every write of a reconcile that ignores its context once the lease is lost, and returns anyway", func(ctx SpecContext) {
		const lease = "e2e-fenced"
		mgr := newManager(ns, electing(ns, lease, "fenced", losing))
		c := mgr.Client()
		writes := &writeLog{}
		release := make(chan struct{})
		began := make(chan struct{})
		counter := createConfigMap(ctx, ns, "counter", nil)
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "stubborn-writer", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				if req.Name != "busy" {
					return reconcile.Result{}, nil
				}
				close(began)
				// Ignores its context: writes until the spec ends, paced
				// like a busy reconcile.
				pace := time.NewTicker(20 * time.Millisecond)
				defer pace.Stop()
				for i := 0; ; i++ {
					select {
					case <-release:
						return reconcile.Result{}, nil
					case <-pace.C:
					}
					begin := time.Now()
					patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)
					err := c.Patch(context.WithoutCancel(ctx), counter.DeepCopy(), types.MergePatchType, patch)
					writes.add(begin, time.Now(), err)
				}
			}))).To(Succeed())
		run := runManager(ctx, mgr)
		DeferCleanup(func() { close(release) }) // runs before run's cleanup
		createConfigMap(ctx, ns, "busy", nil)
		Eventually(ctx, began).Should(BeClosed())
		Eventually(ctx, writes.succeeded).Should(BeNumerically(">=", 5), "the leader never wrote")

		By("another process taking the lease while the reconcile writes")
		taken := stealLease(ctx, ns, lease)
		Eventually(ctx, run.done).WithTimeout(losing.renewDeadline+15*time.Second).Should(BeClosed(), "Start did not return after losing the lease")
		Expect(run.err).To(MatchError(framework.ErrLeaderElectionLost))
		Expect(run.err).To(MatchError(framework.ErrNotStopped), "Start's error does not say a reconcile was abandoned")
		Expect(run.err.Error()).To(And(ContainSubstring(`"stubborn-writer"`), ContainSubstring(ns+"/busy")))

		By("checking that no write left the process after it knew it had lost the lease")
		Eventually(ctx, writes.refused).Should(BeNumerically(">=", 3), "the abandoned reconcile stopped trying to write")
		lossSeen := writes.firstRefusal()
		for _, w := range writes.all() {
			if w.err != nil {
				Expect(w.err).To(MatchError(framework.ErrNotLeader), "a write failed for another reason than the lost lease")
			}
		}
		afterLoss := writes.succeededBeginningAfter(lossSeen)
		afterReturn := writes.succeededBeginningAfter(run.returned)
		betweenTheftAndLoss := writes.succeededBeginningAfter(taken) - afterLoss
		// Server side: the counter never moves once Start has returned.
		stored, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "counter", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(ctx, func() (string, error) {
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "counter", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return cm.ResourceVersion, nil
		}).WithTimeout(2*time.Second).Should(Equal(stored.ResourceVersion), "a write reached the API server after Start returned")
		GinkgoWriter.Printf("writes: %d succeeded, %d refused; %d between the theft and the loss being seen (%v later), %d after the loss, %d after Start returned (%v after the theft)\n",
			writes.succeeded(), writes.refused(), betweenTheftAndLoss, lossSeen.Sub(taken).Round(time.Millisecond), afterLoss, afterReturn, run.returned.Sub(taken).Round(time.Millisecond))
		AddReportEntry("writes after leadership loss", afterLoss)
		AddReportEntry("writes between lease theft and loss detection", betweenTheftAndLoss)
		AddReportEntry("Start returned after lease theft", run.returned.Sub(taken).Round(time.Millisecond).String())
		Expect(afterLoss).To(BeZero(), "writes succeeded after the process saw it lost the lease")
		Expect(afterReturn).To(BeZero(), "writes succeeded after Start returned")
		Expect(lossSeen.Sub(taken)).To(BeNumerically("<", losing.renewDeadline+losing.retryPeriod+1500*time.Millisecond), "the loss was seen later than RenewDeadline allows")
	}, SpecTimeout(2*time.Minute))
})

// stealLease makes "thief" hold the lease ns/name for a minute, as a
// process that took it over would, and returns when.
func stealLease(ctx context.Context, ns, name string) time.Time {
	GinkgoHelper()
	leases := kube.CoordinationV1().Leases(ns)
	var taken time.Time
	Eventually(ctx, func() error {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
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
	return taken
}

// write is one write attempt: when it began and ended, and its error.
type write struct {
	begin, end time.Time
	err        error
}

// writeLog records write attempts. Safe for concurrent use.
type writeLog struct {
	mu sync.Mutex
	// writes holds the attempts in order; mu guards it.
	writes []write
}

func (l *writeLog) add(begin, end time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, write{begin, end, err})
}

func (l *writeLog) all() []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

func (l *writeLog) succeeded() int {
	n := 0
	for _, w := range l.all() {
		if w.err == nil {
			n++
		}
	}
	return n
}

func (l *writeLog) refused() int { return len(l.all()) - l.succeeded() }

// firstRefusal returns when the first refused write began: when the process
// knew it no longer led.
func (l *writeLog) firstRefusal() time.Time {
	for _, w := range l.all() {
		if w.err != nil {
			return w.begin
		}
	}
	return time.Time{}
}

// succeededBeginningAfter counts the writes that began after t and succeeded.
func (l *writeLog) succeededBeginningAfter(t time.Time) int {
	n := 0
	for _, w := range l.all() {
		if w.err == nil && w.begin.After(t) {
			n++
		}
	}
	return n
}
