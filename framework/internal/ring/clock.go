package ring

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// backdateLocked returns when Lease l, seen for the first time at now,
// was renewed at the latest by this member's clock: the renewal time l
// carries (its holder's clock) plus MaxClockSkew, when that is earlier
// than now. A member started after a crash then sees the crashed member's
// Leases expired at once, rather than after watching them unchanged for
// Lease.Duration; a Lease it saw change is judged by when it saw the
// change. Now when MaxClockSkew is negative, or once a Lease showed a
// clock further off than it allows (see checkClock). r.mu must be held.
func (r *Ring) backdateLocked(l *coordinationv1.Lease, now time.Time) time.Time {
	if r.opts.MaxClockSkew < 0 || r.distrust || l.Spec.RenewTime == nil {
		return now
	}
	if t := l.Spec.RenewTime.Add(r.opts.MaxClockSkew); t.Before(now) {
		return t
	}
	return now
}

// checkClock looks at the renewal time Lease update n carries, written by
// another member's clock, as it arrives: when it is further behind this
// member's clock than MaxClockSkew plus Lease.Duration − RenewDeadline (the
// margin a Lease's expiry keeps over its holder's fence), either the
// holder's clock is off by more than backdateLocked may assume or the
// watch is that late. Either way this member stops judging Leases by the
// time they carry, and says so once.
func (r *Ring) checkClock(o, n *coordinationv1.Lease) {
	if r.opts.MaxClockSkew < 0 || n.Spec.RenewTime == nil || Holder(n) == "" || Holder(n) == r.opts.Lease.Identity ||
		o.Spec.RenewTime != nil && o.Spec.RenewTime.Equal(n.Spec.RenewTime) {
		return
	}
	lag := time.Since(n.Spec.RenewTime.Time)
	if lag <= r.opts.MaxClockSkew+r.opts.Lease.Duration-r.opts.Lease.RenewDeadline {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.distrust {
		return
	}
	r.distrust = true
	for name, o := range r.seen {
		if o.since.Before(o.at) {
			o.since = o.at
			r.seen[name] = o
		}
	}
	// The delay may be this process's own (stopped, starved of CPU): the
	// message blames neither side.
	r.log.Error(fmt.Errorf("lease %s renewed by %q arrived %v after the renewal time it carries: the clock of this process or of %q is off, or this process was paused", n.Name, Holder(n), lag.Round(time.Millisecond), Holder(n)),
		"the clocks of this process and of another member differ by more than sharding.Options.MaxClockSkew allows, or this process was paused (stopped, starved of CPU) or its watch of the ring's Leases is that late: from now on this member judges Leases only by when it sees them change, as if MaxClockSkew were negative",
		"maxClockSkew", r.opts.MaxClockSkew)
}
