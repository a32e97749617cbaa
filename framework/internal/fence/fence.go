package fence

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lapsed says whether a Lease last renewed at renewed is fenced at now:
// not renewed within deadline. Times from time.Now compare on the
// monotonic clock, which a changed wall clock does not move.
func Lapsed(renewed, now time.Time, deadline time.Duration) bool {
	return now.Sub(renewed) >= deadline
}

// Lock is the resourcelock a leader elector takes and renews its Lease
// through; it records when each successful Create or Update of a record
// naming Identity() as holder was sent, and Check refuses once that is
// Deadline old. A renewal that failed, or a write of a record naming
// another holder (a release), records nothing. It is safe for concurrent
// use.
type Lock struct {
	resourcelock.Interface
	// Deadline is the lease's RenewDeadline.
	Deadline time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	// mu guards renewed, when the last successful write of our record was
	// sent (zero: none yet).
	renewed time.Time
}

// LeaseLock returns the Lock of Lease namespace/name in c, held as identity.
func LeaseLock(c coordinationv1client.LeasesGetter, namespace, name, identity string, deadline time.Duration) *Lock {
	return &Lock{Deadline: deadline, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     c,
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}
}

// Create creates the record and, when it names this holder and succeeds,
// records when it was sent.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Create(ctx, ler)
	l.stamp(ler, sent, err)
	return err
}

// Update updates the record and, when it names this holder and succeeds,
// records when it was sent.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Update(ctx, ler)
	l.stamp(ler, sent, err)
	return err
}

// stamp records sent as the last renewal when the write of ler, sent then,
// succeeded and names this holder. The time the request left, not the time
// the answer came, is what other processes' view of the Lease can be older
// than.
func (l *Lock) stamp(ler resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	if err != nil || ler.HolderIdentity != l.Identity() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.After(l.renewed) {
		l.renewed = sent
	}
}

// Check returns nil while the record was written within Deadline, else an
// error saying how long ago it was (or that it never was).
func (l *Lock) Check() error {
	l.mu.Lock()
	renewed := l.renewed
	l.mu.Unlock()
	if renewed.IsZero() {
		return fmt.Errorf("lease %s never renewed by %q", l.Describe(), l.Identity())
	}
	if now := l.now(); Lapsed(renewed, now, l.Deadline) {
		return fmt.Errorf("lease %s last renewed %v ago, RenewDeadline %v", l.Describe(), now.Sub(renewed).Round(time.Millisecond), l.Deadline)
	}
	return nil
}

// Held returns nil while elector, which renews through l, last saw its
// record name this holder and l.Check passes, else why not.
func (l *Lock) Held(elector *leaderelection.LeaderElector) error {
	if !elector.IsLeader() {
		return fmt.Errorf("lease %s held by %q", l.Describe(), elector.GetLeader())
	}
	return l.Check()
}

func (l *Lock) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
