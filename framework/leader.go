package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// runElection joins the election for the lease and starts the leader
// runnables on winning. If leadership is lost while the manager runs,
// loseLeadership is called: when the elector gives up renewing, or as soon
// as a renewal finds the lease held by another process. The returned stop
// function ends the election and, when this process leads, releases the
// lease; call it after the leader runnables stopped and writes are refused.
func (m *Manager) runElection(base context.Context) (stop func(), err error) {
	le := m.opts.LeaderElection
	cs, err := kubernetes.NewForConfig(m.cfg)
	if err != nil {
		return nil, fmt.Errorf("framework: leader election client: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(le.Lease.Namespace, le.ID),
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Lease.Identity},
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
				isLeader := elector.IsLeader
				m.isLeader.Store(&isLeader)
				log.Info("became leader: starting controllers")
				m.becomeLeader()
				go m.watchLease(ctx, elector, le.Lease.RetryPeriod, stopping)
			},
			OnStoppedLeading: func() {
				status.Set(0)
				select {
				case <-stopping: // our own shutdown
				default:
					m.loseLeadership()
				}
			},
			OnNewLeader: func(identity string) {
				if identity != le.Lease.Identity {
					log.Info("another process leads; keeping caches warm as a standby", "leader", identity)
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

// watchLease declares leadership lost as soon as a renewal of the elector
// finds the lease held by another process: the elector itself keeps trying
// until RenewDeadline, while the other process already leads. It returns
// when ctx ends (the elector stopped leading) or the manager stops.
func (m *Manager) watchLease(ctx context.Context, elector *leaderelection.LeaderElector, period time.Duration, stopping <-chan struct{}) {
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
		if !elector.IsLeader() {
			select {
			case <-stopping: // our own release
			default:
				m.loseLeadership()
			}
			return
		}
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func metaFor(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
