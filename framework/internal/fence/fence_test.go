package fence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/converge-dev/converge/framework/internal/fence"
)

// stubLock answers writes with err and counts nothing else.
type stubLock struct {
	resourcelock.Interface
	err error
}

func (s *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s *stubLock) Identity() string                                                { return "me" }
func (s *stubLock) Describe() string                                                { return "ns/lease" }

// fakeClock is a clock the test moves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestFenceLockRefusesOnceLastRenewalIsRenewDeadlineOld(t *testing.T) {
	const deadline = 3 * time.Second
	clock := &fakeClock{now: time.Unix(1000, 0)}
	stub := &stubLock{}
	l := &fence.Lock{Interface: stub, Deadline: deadline, Now: clock.Now}
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	if err := l.Check(); err == nil || !strings.Contains(err.Error(), "never renewed") {
		t.Fatalf("Check before any renewal = %v, want never renewed", err)
	}
	if err := l.Create(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(deadline - time.Millisecond)
	if err := l.Check(); err != nil {
		t.Fatalf("Check within RenewDeadline of the renewal = %v, want nil", err)
	}

	// A renewal that failed, and a release (a record naming no holder),
	// record nothing: the fence still counts from the Create.
	stub.err = errors.New("connection refused")
	if err := l.Update(t.Context(), mine); err == nil {
		t.Fatal("Update through a failing lock succeeded")
	}
	stub.err = nil
	if err := l.Update(t.Context(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(time.Millisecond)
	err := l.Check()
	if err == nil || !strings.Contains(err.Error(), "last renewed 3s ago, RenewDeadline 3s") {
		t.Fatalf("Check RenewDeadline after the last successful renewal = %v, want refused naming both", err)
	}

	// A successful renewal opens the fence again, counted from when it was sent.
	if err := l.Update(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(deadline / 2)
	if err := l.Check(); err != nil {
		t.Fatalf("Check after a successful renewal = %v, want nil", err)
	}
}

func TestFenceLapsed(t *testing.T) {
	at := time.Unix(1000, 0)
	for _, tc := range []struct {
		age  time.Duration
		want bool
	}{{0, false}, {3*time.Second - 1, false}, {3 * time.Second, true}, {9 * time.Second, true}} {
		if got := fence.Lapsed(at, at.Add(tc.age), 3*time.Second); got != tc.want {
			t.Errorf("Lapsed after %v with RenewDeadline 3s = %v, want %v", tc.age, got, tc.want)
		}
	}
}
