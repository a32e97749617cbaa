package framework

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
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

// group runs runnables on one context; the first failure is reported on errs.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan<- error
}

func newGroup(parent context.Context, errs chan<- error) *group {
	ctx, cancel := context.WithCancel(parent)
	return &group{ctx: ctx, cancel: cancel, errs: errs}
}

func (g *group) start(r Runnable) {
	g.wg.Go(func() {
		if err := r.Start(g.ctx); err != nil {
			select {
			case g.errs <- err:
			default: // an earlier failure is already stopping the manager
			}
		}
	})
}

// stop cancels the group's context and waits for its runnables.
func (g *group) stop() {
	g.cancel()
	g.wg.Wait()
}

// Start runs the manager until ctx is cancelled or a component fails:
//
//  1. it serves /healthz, /readyz and /metrics when configured;
//  2. it runs the shared cache and waits until every informer requested so
//     far has synced (readiness turns true then);
//  3. it runs the runnables that need no leadership, then, once this process
//     is the leader (at once without leader election), the controllers and
//     other runnables that need it. Standbys keep their caches warm, so a new
//     leader starts reconciling as soon as it wins.
//
// On cancellation it stops controllers taking new keys, lets in-flight
// reconciles finish (up to Options.GracefulShutdownTimeout), releases the
// lease, stops the cache and servers, and returns nil. If a component fails,
// it shuts down the same way and returns that error. If leadership is lost,
// it cancels in-flight reconciles at once and returns ErrLeaderElectionLost
// within the lease's RenewDeadline. A manager can be started once; a second
// call returns ErrManagerStarted.
func (m *Manager) Start(ctx context.Context) (err error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrManagerStarted
	}
	m.started = true
	m.mu.Unlock()

	// Everything below ctx's cancellation runs on contexts of its own so the
	// shutdown order is ours: leader work, lease, other runnables, cache, servers.
	// client-go (reflectors, leader election) logs through the context's
	// logger: the manager's.
	base := klog.NewContext(context.WithoutCancel(ctx), capVerbosity(m.log))
	servers := newGroup(base, m.runErr)
	defer servers.stop()
	if err := m.startServers(servers); err != nil {
		return err
	}

	cacheGroup := newGroup(base, m.runErr)
	cacheGroup.start(RunnableFunc(m.cache.Start))
	cacheGroup.start(RunnableFunc(m.runEvents))
	defer cacheGroup.stop()

	m.log.V(1).Info("waiting for caches to sync")
	restoreGC := relaxGC(m.opts.SyncGCPercent)
	err = m.cache.WaitForSync(ctx)
	restoreGC()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("framework: start manager: %w", err)
	}
	m.synced.Store(true)

	always := newGroup(base, m.runErr)
	defer always.stop()
	leaders := newGroup(base, m.runErr)

	m.mu.Lock()
	m.always, m.leaders = always, leaders
	pending := m.runnables
	m.runnables = nil
	for _, r := range pending {
		if !needsLeader(r) {
			always.start(r)
		}
	}
	m.mu.Unlock()

	lost := make(chan struct{})
	stopElection := func() {}
	if m.opts.LeaderElection.Enabled {
		stopElection, err = m.runElection(base, lost)
		if err != nil {
			leaders.stop()
			return err
		}
	} else {
		m.becomeLeader()
	}
	m.log.V(1).Info("manager started")

	select {
	case <-ctx.Done():
		m.log.V(1).Info("stopping manager")
	case err = <-m.runErr:
		m.log.Error(err, "stopping manager after a component failed")
	case <-lost:
		err = ErrLeaderElectionLost
		m.lostLeadership.Store(true) // controllers cancel in-flight work at once
		m.log.Info("leader election lost: stopping controllers")
	}
	leaders.stop() // controllers drain first...
	stopElection() // ...then the lease is released...
	return err     // ...then (deferred) other runnables, the cache and servers stop.
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
		m.leaders.start(r)
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
