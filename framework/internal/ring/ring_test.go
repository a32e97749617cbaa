package ring

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

func TestAssignIsBalancedAndDeterministic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 32, 40} {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("member-%d", i)
		}
		owners := Assign(32, members)
		load := map[string]int{}
		for b, o := range owners {
			if o == "" {
				t.Fatalf("%d members: bucket %d has no owner", n, b)
			}
			load[o]++
		}
		limit := (32 + n - 1) / n
		for m, l := range load {
			if l > limit {
				t.Errorf("%d members: %s owns %d buckets, more than ceil(32/%d) = %d", n, m, l, n, limit)
			}
		}
		if again := Assign(32, members); fmt.Sprint(again) != fmt.Sprint(owners) {
			t.Errorf("%d members: assignment changed between two calls", n)
		}
	}
	if owners := Assign(4, nil); owners[0] != "" {
		t.Errorf("no members: bucket 0 owned by %q", owners[0])
	}
}

func TestAssignMovesFewBucketsWhenAMemberJoins(t *testing.T) {
	before := Assign(32, []string{"a", "b"})
	after := Assign(32, []string{"a", "b", "c"})
	toNew, between := 0, 0
	for b := range before {
		switch {
		case before[b] == after[b]:
		case after[b] == "c":
			toNew++
		default:
			between++ // moved by the load limit
		}
	}
	// c takes its share, 10 or 11 buckets; keeping loads within
	// ceil(32/3) may move a couple between a and b, not more.
	if toNew < 10 || toNew > 11 || between > 2 {
		t.Errorf("a third member joining moved %d buckets to it and %d between the others; want 10 or 11 and at most 2", toNew, between)
	}
}

func TestFenceRefusesBucketsNotHeldOrNotRenewed(t *testing.T) {
	r := &Ring{opts: sharding.Options{Ring: "r", Lease: lease.Options{Namespace: "ns", RenewDeadline: time.Second}}, held: map[unit]*heldBucket{}}
	if err := r.Check(3); !errors.Is(err, sharding.ErrBucketNotHeld) || !strings.Contains(err.Error(), "bucket 3 of ring ns/r") {
		t.Errorf("check of a bucket never held = %v, want sharding.ErrBucketNotHeld naming it", err)
	}
	r.held[bucketUnit(3)] = &heldBucket{renewed: time.Now()}
	r.layoutRenewed = time.Now()
	if err := r.Check(3); err != nil {
		t.Errorf("check of a bucket renewed now = %v", err)
	}
	r.held[bucketUnit(3)].renewed = time.Now().Add(-2 * time.Second)
	if err := r.Check(3); !errors.Is(err, sharding.ErrBucketNotHeld) || !strings.Contains(err.Error(), "last renewed") {
		t.Errorf("check of a bucket renewed 2 s ago with a 1 s RenewDeadline = %v, want sharding.ErrBucketNotHeld", err)
	}
	// The ring's layout Lease is renewed with the buckets: a member that
	// could not renew it for RenewDeadline may have been taken over by
	// another layout, whose buckets overlap its own.
	r.held[bucketUnit(3)].renewed = time.Now()
	r.layoutRenewed = time.Now().Add(-2 * time.Second)
	if err := r.Check(3); !errors.Is(err, sharding.ErrBucketNotHeld) || !strings.Contains(err.Error(), "last renewed") {
		t.Errorf("check of a bucket renewed now, the layout Lease 2 s ago, with a 1 s RenewDeadline = %v, want sharding.ErrBucketNotHeld", err)
	}
}

// A member cut off from the API server keeps its claims until it loses
// them, but neither reports their buckets as served nor says it is ready
// while their fence is down.
func TestStatusAndReadinessShowFencedBuckets(t *testing.T) {
	r := &Ring{opts: sharding.Options{Ring: "r", Lease: lease.Options{Namespace: "ns", RenewDeadline: time.Second}},
		held: map[unit]*heldBucket{}, assessed: true, formed: true}
	r.held[bucketUnit(1)] = &heldBucket{renewed: time.Now(), state: bucketServing}
	r.held[bucketUnit(2)] = &heldBucket{renewed: time.Now(), state: bucketServing}
	r.layoutRenewed = time.Now()
	if s := r.Status(); fmt.Sprint(s.Serving) != "[1 2]" || len(s.Fenced) != 0 {
		t.Errorf("renewed now: serving %v, fenced %v; want [1 2] and none", s.Serving, s.Fenced)
	}
	if err := r.Ready(); err != nil {
		t.Errorf("renewed now: ready() = %v", err)
	}
	r.held[bucketUnit(2)].renewed = time.Now().Add(-2 * time.Second)
	s := r.Status()
	if fmt.Sprint(s.Serving) != "[1]" || fmt.Sprint(s.Fenced) != "[2]" {
		t.Errorf("bucket 2 renewed 2 s ago, RenewDeadline 1 s: serving %v, fenced %v; want [1] and [2]", s.Serving, s.Fenced)
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "buckets [2] not renewed") {
		t.Errorf("bucket 2 fenced: ready() = %v, want an error naming it", err)
	}
	r.held[bucketUnit(2)].renewed = time.Now()
	r.layoutRenewed = time.Now().Add(-2 * time.Second)
	if s := r.Status(); len(s.Serving) != 0 || fmt.Sprint(s.Fenced) != "[1 2]" {
		t.Errorf("layout Lease renewed 2 s ago: serving %v, fenced %v; want none and [1 2]", s.Serving, s.Fenced)
	}
}

// barrierLeases holds each bucket Lease update until n of them are in
// flight at once, or ctx ends.
type barrierLeases struct {
	coordclient.LeaseInterface
	n        int32
	inflight atomic.Int32
	all      chan struct{}
}

func (l *barrierLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if lease.Labels[RoleLabel] == RoleBucket {
		if l.inflight.Add(1) == l.n {
			close(l.all)
		}
		select {
		case <-l.all:
		case <-ctx.Done():
		}
		defer l.inflight.Add(-1)
	}
	return l.LeaseInterface.Update(ctx, lease, opts)
}

func TestRenewSendsTheBucketLeasesAtOnce(t *testing.T) {
	// One after another, a member holding many buckets renews its member
	// Lease only once the whole round is done: with 32 buckets and a slow
	// API server, later than RenewDeadline, and it counts itself out.
	const n = 8
	cs := fake.NewClientset()
	opts := sharding.Options{
		Ring:    "r",
		Buckets: sharding.Buckets{Count: 32},
		Lease:   lease.Options{Namespace: "ns", Identity: "me", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
	r := New(cs.CoordinationV1(), opts, logr.Discard(), NewMetrics(opts.Ring))
	leases := &barrierLeases{LeaseInterface: r.leases, n: n, all: make(chan struct{})}
	r.leases = leases
	before := time.Now()
	for b := range n {
		l, err := cs.CoordinationV1().Leases("ns").Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: BucketLeaseName("r", b), Namespace: "ns", Labels: map[string]string{RingLabel: "r", RoleLabel: RoleBucket}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &opts.Lease.Identity},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.held[bucketUnit(b)] = &heldBucket{lease: l, state: bucketServing}
	}
	// Renewed one after another, the first update would wait for the
	// others until ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r.renew(ctx)
	select {
	case <-leases.all:
	default:
		t.Fatalf("renew sent the %d bucket Lease updates one after another, not at once", n)
	}
	for b, h := range r.held {
		if h.renewed.Before(before) || h.lease.Spec.RenewTime == nil {
			t.Errorf("%v: renewed %v, Lease renew time %v; want both set by the round", b, h.renewed, h.lease.Spec.RenewTime)
		}
	}
	if r.member == nil || r.memberRenewed.Before(before) {
		t.Errorf("the member Lease was not written by the round (member %v, renewed %v)", r.member, r.memberRenewed)
	}
}

// A round of renewals begins a hair after the tick that woke it, so the
// next tick comes a hair less than RetryPeriod after the round: it renews
// all the same. Asking for a whole RetryPeriod there skipped every other
// tick, and a Lease renewed every 2 × RetryPeriod expired as little as
// Lease.Duration − 2 × RetryPeriod after its holder crashed.
func TestEveryTickRenews(t *testing.T) {
	t0 := time.Now()
	r := &Ring{opts: sharding.Options{Lease: lease.Options{RetryPeriod: time.Second}}}
	if !r.renewDue(false, t0) {
		t.Error("the first look does not renew")
	}
	r.lastRenew = t0
	for _, c := range []struct {
		ticked bool
		after  time.Duration
		want   bool
	}{
		{true, time.Second - time.Microsecond, true}, // the next tick, woken a hair early
		{true, time.Second, true},
		{false, time.Second - time.Microsecond, false}, // a look woken by a Lease's change
		{false, time.Second, true},                     // ... once a round is late
		{true, 100 * time.Millisecond, false},          // a tick just after a late round
	} {
		if got := r.renewDue(c.ticked, t0.Add(c.after)); got != c.want {
			t.Errorf("renewDue(ticked %v, %v after the last round began) = %v, want %v", c.ticked, c.after, got, c.want)
		}
	}
}
