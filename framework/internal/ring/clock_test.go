package ring

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
