package ring

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// staleLease is a Lease of ring "r" of role, held by id, renewed at
// renewed, recording layout.
func staleLease(name, role, id string, renewed time.Time, layout Layout) *coordinationv1.Lease {
	stamp := metav1.NewMicroTime(renewed)
	secs := int32(3600)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{RingLabel: "r", RoleLabel: role}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &stamp, RenewTime: &stamp},
	}
	layout.Annotate(l)
	return l
}

// A renewal that arrives further behind this member's clock than
// MaxClockSkew plus Lease.Duration − RenewDeadline shows a clock (or a
// watch) off by more than backdating may assume: the member stops judging
// Leases by the times they carry, and undoes what it judged so.
func TestRingStopsTrustingCarriedTimesOnAClockFarBehind(t *testing.T) {
	opts := sharding.Options{Ring: "r", MaxClockSkew: time.Second, Lease: lease.Options{Identity: "me", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}}
	r := &Ring{opts: opts, seen: map[string]observation{}, log: logr.Discard()}
	now := time.Now()
	r.seen["old"] = observation{rv: "1", since: now.Add(-time.Hour), at: now}
	renewal := func(behind time.Duration) (o, n *coordinationv1.Lease) {
		o = staleLease("x", RoleBucket, "other", now.Add(-time.Minute), Layout{})
		n = staleLease("x", RoleBucket, "other", time.Now().Add(-behind), Layout{})
		return o, n
	}
	r.checkClock(renewal(2 * time.Second))
	if r.distrust {
		t.Fatal("a renewal 2 s behind, within 1 s + 15 s − 10 s, made the member distrust carried times")
	}
	r.checkClock(renewal(time.Minute))
	if !r.distrust {
		t.Fatal("a renewal a minute behind left the member trusting carried times")
	}
	if o := r.seen["old"]; !o.since.Equal(o.at) {
		t.Errorf("a Lease judged by its carried time was not judged again by when it was seen: %+v", o)
	}
	l := staleLease("y", RoleBucket, "other", now.Add(-time.Hour), Layout{})
	if got := r.backdateLocked(l, now); !got.Equal(now) {
		t.Errorf("backdate once distrusting = %v, want now (%v)", got, now)
	}
}

// The late renewal may be this process's fault (a SIGSTOP, a starved CPU)
// as much as the renewer's clock: the log names both, and blames neither.
func TestLateRenewalLogBlamesNeitherSide(t *testing.T) {
	var logged strings.Builder
	log := funcr.New(func(prefix, args string) { logged.WriteString(args) }, funcr.Options{})
	opts := sharding.Options{Ring: "r", MaxClockSkew: time.Second, Lease: lease.Options{Identity: "me", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}}
	r := &Ring{opts: opts, seen: map[string]observation{}, log: log}
	o := staleLease("x", RoleLayout, "r2", time.Now().Add(-time.Hour), Layout{})
	r.checkClock(o, staleLease("x", RoleLayout, "r2", time.Now().Add(-time.Minute), Layout{}))
	got := logged.String()
	if !strings.Contains(got, `this process or of \"r2\"`) || !strings.Contains(got, "this process was paused") {
		t.Errorf("the log does not name both this process and r2: %s", got)
	}
	if strings.Contains(got, "a member's clock is behind") {
		t.Errorf("the log blames the other member: %s", got)
	}
}

// A cluster's Lease is claimed Lease.Duration after this member saw it
// change, or, never seen before, Lease.Duration + MaxClockSkew after the
// renewal time it carries; never earlier, even once its holder's member
// Lease expired and the assignment gives the cluster to this member. Its
// holder's fence closed RenewDeadline after that renewal began.
func TestAClusterIsClaimedNoSoonerThanLeaseDurationAfterItsLastRenewal(t *testing.T) {
	d, skew := 4*time.Second, time.Second
	opts := sharding.Options{Ring: "r", MaxClockSkew: skew, Lease: lease.Options{Namespace: "ns", Identity: "me", Duration: d, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}}
	t0 := time.Now()
	for _, tc := range []struct {
		name    string
		seen    bool          // this member saw the Lease at an earlier version
		carried time.Duration // its renewal time, before t0
		expires time.Duration // after t0
	}{
		{"seen to change", true, time.Hour, d},
		{"seen to change, carrying t0", true, 0, d},
		{"first seen, renewed at t0", false, 0, d},
		{"first seen, renewed 2 s before t0", false, 2 * time.Second, d + skew - 2*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(fake.NewClientset().CoordinationV1(), opts, logr.Discard(), NewMetrics(opts.Ring))
			u := &stubClusters{}
			u.set("x")
			if err := r.SpreadClusters(u); err != nil {
				t.Fatal(err)
			}
			l := staleLease(ClusterLeaseName("r", "x"), RoleCluster, "dead", t0.Add(-tc.carried), Layout{})
			l.Labels[ClusterLabel], l.ResourceVersion = "x", "2"
			r.mu.Lock()
			defer r.mu.Unlock()
			if tc.seen {
				r.seen[l.Name] = observation{rv: "1", since: t0.Add(-time.Hour), at: t0.Add(-time.Hour)}
			}
			byName := r.observeLocked([]*coordinationv1.Lease{l}, t0)
			for _, at := range []time.Duration{tc.expires - time.Millisecond, tc.expires} {
				claims := r.rebalanceClustersLocked(t.Context(), byName, []string{"me"}, []string{"x"}, true, t0.Add(at))
				if got, want := len(claims) == 1 && claims[0].why == "expired", at >= tc.expires; got != want {
					t.Errorf("claimed %v after t0: %v (%+v), want %v: the Lease expires %v after t0", at, got, claims, want, tc.expires)
				}
			}
		})
	}
}
