package ring

import (
	"context"
	"errors"
)

// changedLocked tells Accepted's callers that this member came to hold the
// ring's layout or was refused. r.mu must be held for writing.
func (r *Ring) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Accepted says whether this member holds the ring's layout: it wrote the
// layout Lease at least once and is not refused since. The channel is
// closed at the next change.
func (r *Ring) Accepted() (bool, <-chan struct{}) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.refused == nil && !r.layoutRenewed.IsZero(), r.changed
}

// Campaign runs the manager's leader election, run, only while this member
// holds the ring's layout: a member the ring refuses (its layout differs
// from the live members') must not lead, for the leader alone serves the
// manager's own cluster, and the members of the ring would not agree on
// who serves it. Run starts the election (until ctx ends) and returns the
// function that stops it; elected is closed once this process leads; lose
// steps down, refusing writes at once, naming its cause. A member refused while it leads
// steps down before its election stops, so no two leaders ever write. For
// a nil Ring, Campaign is run. The returned function stops the campaign.
func (r *Ring) Campaign(ctx context.Context, elected <-chan struct{}, run func(context.Context) (func(), error), lose func(cause error)) (func(), error) {
	if r == nil {
		return run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var stopRun func()
		defer func() {
			if stopRun != nil {
				stopRun()
			}
		}()
		for {
			ok, changed := r.Accepted()
			var leads <-chan struct{} // watched while refused: a late win
			switch {
			case ok && stopRun == nil:
				s, err := run(ctx)
				if err != nil {
					r.log.Error(err, "joining leader election failed; trying again when the ring next changes")
				}
				stopRun = s
			case !ok:
				leads = elected
				if isClosed(elected) {
					r.log.Info("refused by the sharding ring while leading: stepping down")
					lose(errors.New("the sharding ring refused this member while it led"))
					return
				}
				if stopRun != nil {
					r.log.Info("refused by the sharding ring: no longer campaigning for leadership")
					stopRun()
					stopRun = nil
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-leads:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
