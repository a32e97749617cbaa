package framework_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/internal/fence"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
)

// stallingLock stands in for a leader frozen in the middle of a renewal
// (SIGSTOP, a starved process): once stall is closed, every Create and
// Update blocks, whatever its context says, until release is closed, so
// the elector neither renews nor gives up.
type stallingLock struct {
	resourcelock.Interface
	stall, release <-chan struct{}
}

func (s *stallingLock) wait() {
	select {
	case <-s.stall:
		<-s.release
	default:
	}
}

func (s *stallingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	s.wait()
	return s.Interface.Create(ctx, ler)
}

func (s *stallingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	s.wait()
	return s.Interface.Update(ctx, ler)
}

// A leader whose elector is stuck in a renewal still observes itself as the
// holder: only the time of its last renewal tells it that another process
// may lead. Its writes are refused from then on, and Start returns
// ErrLeaderElectionLost.
func TestLeaderFenceRefusesWritesOnceLastRenewalIsRenewDeadlineOld(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	electing := func(identity string) framework.Options {
		return framework.Options{LeaderElection: framework.LeaderElectionOptions{Enabled: true, ID: "fenced", Lease: lease.Options{
			Namespace: ns, Identity: identity, Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second,
		}}}
	}
	frozen := testenv.NewManager(t, cfg, electing("frozen"))
	stall, release := make(chan struct{}), make(chan struct{})
	framework.SetLeaseHook(frozen, func(l *fence.Lock) {
		l.Interface = &stallingLock{Interface: l.Interface, stall: stall, release: release}
	})
	run := testenv.StartManager(t, frozen)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	<-frozen.Elected()
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	if err := frozen.Client().Create(t.Context(), cm("while-leading")); err != nil {
		t.Fatalf("write of the leader before its renewals stall: %v", err)
	}

	close(stall)
	taker := testenv.NewManager(t, cfg, electing("taker"))
	testenv.StartManager(t, taker)
	<-taker.Elected() // at least Lease.Duration after the frozen leader's last renewal

	err := frozen.Client().Create(t.Context(), cm("after-takeover"))
	if !errors.Is(err, framework.ErrNotLeader) {
		t.Fatalf("write of a leader whose last renewal is older than RenewDeadline, while another process leads = %v, want ErrNotLeader", err)
	}
	t.Logf("refused: %v", err)
	close(release)
	<-run.Done
	if !errors.Is(run.Err, framework.ErrLeaderElectionLost) {
		t.Fatalf("Start of the fenced leader returned %v, want ErrLeaderElectionLost", run.Err)
	}
}
