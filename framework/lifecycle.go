package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/converge-dev/converge/framework/internal/runner"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/internal/klogcap"
)

// ErrLeaderElectionLost is returned by Start when this process stopped being
// the leader (it could not renew its lease in time, or another process took
// it). The controllers have stopped by then; main should exit, and the
// process's restart rejoins the election as a standby.
var ErrLeaderElectionLost = errors.New("framework: leader election lost")

// LeaderElectionRunnable is the optional interface through which a Runnable
// says whether it needs leadership. Runnables that do not implement it need
// leadership; controllers need it unless ControllerOptions.WithoutLeaderElection.
type LeaderElectionRunnable interface {
	NeedLeaderElection() bool
}

func needsLeader(r Runnable) bool {
	if l, ok := r.(LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}

// ErrNotStopped is wrapped by the error Start returns when reconciles (or
// other runnables) did not return within the graceful shutdown timeout and
// CancelGrace after their contexts were cancelled: Start left them
// running and returned. The error names each of them; the client refuses
// their writes from then on.
var ErrNotStopped = errors.New("framework: left running after its context was cancelled")

// CancelGrace is how long a reconcile, or another runnable, whose context
// was cancelled may take to return before the manager abandons it: leaves
// it running, refuses its writes, and names it in an error wrapping
// ErrNotStopped. It bounds Manager.Start whatever the reconcilers do.
const CancelGrace = 2 * time.Second

// newGroup returns a group of runnables on a context of parent, whose
// first failure is reported on errs.
func newGroup(parent context.Context, errs chan<- error) *runner.Group {
	return runner.New(parent, errs, ErrNotStopped)
}

// Start runs the manager until ctx is cancelled or a component fails:
//
//  1. it serves /healthz, /readyz and /metrics when configured, and the
//     webhooks when any is registered (AddWebhook, AddConversion), on every
//     replica: the webhook server is not gated by leader election;
//  2. it runs the shared cache and waits until every informer requested so
//     far has synced (readiness turns true then);
//  3. it runs the runnables that need no leadership, then, once this process
//     is the leader (at once without leader election), the controllers and
//     other runnables that need it. Standbys keep their caches warm, so a new
//     leader starts reconciling as soon as it wins.
//
// On cancellation it stops controllers taking new keys, lets in-flight
// reconciles finish (up to Options.GracefulShutdownTimeout, then cancels
// their contexts), makes the client refuse writes (ErrManagerStopped),
// releases the lease, stops the cache and servers, and returns nil. If a
// component fails, it shuts down the same way and returns that error. If
// leadership is lost, the client refuses writes at once (ErrNotLeader),
// in-flight reconciles are cancelled at once, and Start returns
// ErrLeaderElectionLost within the lease's RenewDeadline (sooner when a
// renewal finds the lease held by another process).
//
// Start is bounded whatever the reconcilers do: a reconcile still running
// CancelGrace after its context was cancelled is abandoned (left running, its
// writes refused), logged with its controller and key, and Start's error
// then wraps ErrNotStopped and names it. The servers stop last, each
// waiting up to 5 seconds for requests in flight (a webhook call, a scrape).
// A manager can be started once; a second call returns ErrManagerStarted.
func (m *Manager) Start(ctx context.Context) (err error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrManagerStarted
	}
	m.started = true
	m.mu.Unlock()
	defer m.refuseWrites(ErrManagerStopped)
	defer m.releaseUnstarted()

	// Everything below ctx's cancellation runs on contexts of its own so the
	// shutdown order is ours: runnables, lease, cache, servers.
	// client-go (reflectors, leader election) logs through the context's
	// logger: the manager's.
	base := klog.NewContext(context.WithoutCancel(ctx), klogcap.Logger(m.log))
	servers := newGroup(base, m.runErr)
	defer servers.Stop(0)
	if err := m.startServers(servers); err != nil {
		return err
	}

	cacheGroup := newGroup(base, m.runErr)
	cacheGroup.Start(RunnableFunc(m.cache.Start))
	cacheGroup.Start(RunnableFunc(m.runEvents))
	defer cacheGroup.Stop(0)

	m.log.V(1).Info("waiting for caches to sync")
	began, restoreGC := time.Now(), syncgc.Bound(m.opts.SyncHeapRatio)
	defer restoreGC() // unless the backlog's hold (below) restored it
	if err = m.cache.WaitForSync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("framework: start manager: %w", err)
	}
	m.synced.Store(true)
	// The manager's own cluster is engaged now that its cache synced; the
	// providers engage the others. They are disengaged (deferred) after
	// the controllers stopped, and before the cache stops.
	clusters := newGroup(base, m.runErr)
	clusters.Start(RunnableFunc(m.clusters.Run))
	defer clusters.Stop(0)

	stopRunnables := m.startRunnables(base)
	leaveRing, err := m.startRing(base)
	if err != nil {
		return errors.Join(err, stopRunnables())
	}
	stopElection := func() {}
	if m.opts.LeaderElection.Enabled { // a member its ring refuses does not campaign
		stopElection, err = m.ring.Campaign(base, m.elected, m.runElection, m.loseLeadership)
		if err != nil {
			return errors.Join(err, stopRunnables())
		}
	} else {
		m.becomeLeader()
	}
	cacheGroup.Start(RunnableFunc(func(ctx context.Context) error {
		tick := time.NewTicker(syncgc.Look)
		defer tick.Stop()
		syncgc.Hold(ctx, time.Now, tick.C, restoreGC, time.Since(began), m.backlogs)
		return nil
	}))
	m.log.V(1).Info("manager started")

	select {
	case <-ctx.Done():
		m.log.V(1).Info("stopping manager")
	case err = <-m.runErr:
		m.log.Error(err, "stopping manager after a component failed")
	case <-m.lost:
		err = ErrLeaderElectionLost // writes are refused already, and controllers cancel in-flight work at once
		m.log.Info("leader election lost: stopping controllers")
	}
	stopErr := stopRunnables()        // controllers drain first...
	m.refuseWrites(ErrManagerStopped) // ...then nothing left here writes...
	leaveRing()                       // ...then the buckets are released...
	stopElection()                    // ...then the lease is released...
	return errors.Join(err, stopErr)  // ...then (deferred) the cache and servers stop.
}

// startRunnables starts the runnables added so far that need no leader,
// and returns the function that stops every runnable: both groups at once,
// each within the drain timeout and the grace after it.
func (m *Manager) startRunnables(base context.Context) (stop func() error) {
	always := newGroup(base, m.runErr)
	leaders := newGroup(base, m.runErr)
	m.mu.Lock()
	m.always, m.leaders = always, leaders
	pending := m.runnables
	m.runnables = nil
	for _, r := range pending {
		if !needsLeader(r) {
			always.Start(r)
		}
	}
	m.mu.Unlock()
	return func() error {
		limit := m.drainTimeout() + 2*CancelGrace // controllers abandon stuck reconciles after drainTimeout + CancelGrace
		errs := make(chan error, 1)
		go func() { errs <- always.Stop(limit) }()
		return errors.Join(leaders.Stop(limit), <-errs)
	}
}

// startRing joins the sharding ring, when the manager has one, and returns
// the function that leaves it, releasing the buckets within RenewDeadline.
func (m *Manager) startRing(base context.Context) (leave func(), err error) {
	if m.ring == nil {
		return func() {}, nil
	}
	ringCtx, stopRing := context.WithCancel(base)
	m.ring.Elects = m.opts.LeaderElection.Enabled
	if err := m.ring.Start(ringCtx); err != nil {
		stopRing()
		return nil, err
	}
	return func() {
		stopRing()
		leaveCtx, cancel := context.WithTimeout(base, m.opts.Sharding.Lease.RenewDeadline)
		defer cancel()
		m.ring.Leave(leaveCtx)
	}, nil
}

// releaser is a runnable that holds resources before it starts (a
// controller's queue), to release if it never does.
type releaser interface{ release() }

// releaseUnstarted releases the runnables Start never started: Start
// returned before the caches synced, or before this process led.
func (m *Manager) releaseUnstarted() {
	m.mu.Lock()
	unstarted := append(m.runnables, m.leaderPending...)
	m.runnables, m.leaderPending = nil, nil
	m.mu.Unlock()
	for _, r := range unstarted {
		if rel, ok := r.(releaser); ok {
			rel.release()
		}
	}
}

// becomeLeader starts every runnable that needs leadership, now and later.
func (m *Manager) becomeLeader() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		m.leading = true
		close(m.elected)
	}
	for _, r := range m.leaderPending {
		m.leaders.Start(r)
	}
	m.leaderPending = nil
}

// drainTimeout is the grace in-flight reconciles get when their controller
// stops: none after leadership was lost, since another process may already
// be reconciling the same keys.
func (m *Manager) drainTimeout() time.Duration {
	if m.lostLeadership.Load() || m.opts.GracefulShutdownTimeout < 0 {
		return 0
	}
	return m.opts.GracefulShutdownTimeout
}
