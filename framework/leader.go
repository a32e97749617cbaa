package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// runElection joins the election for the lease and starts the leader
// runnables on winning. lost is closed if leadership is lost while the
// manager runs. The returned stop function ends the election and, when this
// process leads, releases the lease; call it after the leader runnables
// stopped.
func (m *Manager) runElection(base context.Context, lost chan<- struct{}) (stop func(), err error) {
	le := m.opts.LeaderElection
	cs, err := kubernetes.NewForConfig(m.cfg)
	if err != nil {
		return nil, fmt.Errorf("framework: leader election client: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(le.Namespace, le.ID),
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	log := m.log.WithValues("lease", le.Namespace+"/"+le.ID, "identity", le.Identity)
	status := m.metrics.leaderStatus.WithLabelValues(le.ID)
	ctx, cancel := context.WithCancel(base)
	stopping := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.ID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				status.Set(1)
				log.Info("became leader: starting controllers")
				m.becomeLeader()
			},
			OnStoppedLeading: func() {
				status.Set(0)
				select {
				case <-stopping: // our own shutdown
				default:
					close(lost)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != le.Identity {
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

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func metaFor(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
