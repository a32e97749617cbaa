package workqueue

import "github.com/converge-dev/converge/reconcile"

// cause is why a key was queued: the reconcile.Reason of the add, as a small
// code ordered by significance, so that merging the adds of one key keeps
// the highest. The order is reconcile.Reason's: change > retry > requeue >
// replay.
type cause uint8

const (
	causeReplay  cause = iota // AddReplay
	causeRequeue              // AddAfter
	causeRetry                // AddRateLimited
	causeChange               // Add
)

// reason returns c as a reconcile.Reason.
func (c cause) reason() reconcile.Reason {
	switch c {
	case causeReplay:
		return reconcile.ReasonReplay
	case causeRequeue:
		return reconcile.ReasonRequeue
	case causeRetry:
		return reconcile.ReasonRetry
	}
	return reconcile.ReasonChange
}

// hint is what one add asks for a key: its priority class and its cause.
// Merged hints keep the highest of each.
type hint struct {
	prio  priority
	cause cause
}

func (h hint) merge(o hint) hint {
	return hint{prio: max(h.prio, o.prio), cause: max(h.cause, o.cause)}
}

// hintChange is the hint of Add, and of a Push nothing handed a hint to.
var hintChange = hint{prio: normal, cause: causeChange}
