package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/converge-dev/converge/framework/internal/fence"
)

// runElection joins the election for the lease and starts the leader
// runnables on winning. If leadership is lost while the manager runs,
// loseLeadership is called: when the elector gives up renewing, as soon as
// a renewal finds the lease held by another process, or once the lease was
// last renewed RenewDeadline ago (fence.Lock). The returned stop
// function ends the election and, when this process leads, releases the
// lease; call it after the leader runnables stopped and writes are refused.
func (m *Manager) runElection(base context.Context) (stop func(), err error) {
	le := m.opts.LeaderElection
	cs, err := kubernetes.NewForConfig(m.cfg)
	if err != nil {
		return nil, fmt.Errorf("framework: leader election client: %w", err)
	}
	lock := fence.LeaseLock(cs.CoordinationV1(), le.Lease.Namespace, le.ID, le.Lease.Identity, le.Lease.RenewDeadline)
	if m.leaseHook != nil {
		m.leaseHook(lock)
	}
	log := m.log.WithValues("lease", le.Lease.Namespace+"/"+le.ID, "identity", le.Lease.Identity)
	status := m.metrics.LeaderStatus.WithLabelValues(le.ID)
	ctx, cancel := context.WithCancel(base)
	stopping := make(chan struct{})
	var elector *leaderelection.LeaderElector
	elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.Lease.Duration,
		RenewDeadline:   le.Lease.RenewDeadline,
		RetryPeriod:     le.Lease.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.ID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				status.Set(1)
				isLeader := func() error { return lock.Held(elector) }
				m.isLeader.Store(&isLeader)
				log.Info("became leader: starting controllers")
				m.becomeLeader()
				go m.watchLease(ctx, le.Lease.RetryPeriod, stopping)
			},
			OnStoppedLeading: func() {
				status.Set(0)
				select {
				case <-stopping: // our own shutdown
				default:
					m.loseLeadership(fmt.Errorf("lease %s not renewed within RenewDeadline %v", lock.Describe(), le.Lease.RenewDeadline))
				}
			},
			OnNewLeader: func(identity string) {
				switch {
				case identity == le.Lease.Identity:
				case m.isLeader.Load() == nil:
					log.Info("another process leads; keeping caches warm as a standby", "leader", identity)
				default:
					log.Info("another process leads: this one lost the lease, so its controllers stop and Start returns", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("framework: leader election: %w", err)
	}
	log.Info("joining leader election")
	done := make(chan struct{})
	go func() {
		defer close(done)
		elector.Run(ctx)
	}()
	return func() {
		close(stopping)
		cancel()
		<-done
	}, nil
}

// watchLease declares leadership lost (allowWrite) as soon as the elector
// finds the lease held by another process or it was last renewed
// RenewDeadline ago, without waiting for a write. It returns when ctx ends
// (the elector stopped leading), the manager stops or writes are refused.
func (m *Manager) watchLease(ctx context.Context, period time.Duration, stopping <-chan struct{}) {
	tick := time.NewTicker(max(period/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stopping:
			return
		case <-tick.C:
		}
		if m.allowWrite() != nil {
			return
		}
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
