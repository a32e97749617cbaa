package introspect

import (
	"strconv"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// NotConvergedPage is one page of the keys of a controller that are not
// converged, newest first: those whose last reconcile failed or noted a
// Blocker, among the keys the controller keeps a history of
// (framework.ControllerOptions.HistoryKeys), and those a worker holds now.
type NotConvergedPage struct {
	Controller string            `json:"controller"`
	Offset     int               `json:"offset"`
	Limit      int               `json:"limit"`
	Total      int               `json:"total"`
	Keys       []NotConvergedKey `json:"keys"`
}

// NotConvergedKey is a key that is not converged, in a word and a line.
type NotConvergedKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is, in this order of precedence: "in flight" (a worker holds
	// it), "failed" (a terminal error), "failing" (an error or a panic,
	// retried), the words of the Blocker its last reconcile noted
	// ("waiting", "not ready", "child failed"), "delayed" (waiting for a
	// delay that is not a RequeueAfter) or "queued".
	State string `json:"state"`
	// At is when the key's last reconcile ended, or when the one in flight
	// began: the order of the list, newest first.
	At time.Time `json:"at"`
	// Detail is the error, the Blocker's message, or where the key stands.
	Detail string `json:"detail"`
	// Retries counts the failed reconciles since the last success: the
	// queue's workqueue.KeyState.Retries.
	Retries int `json:"retries,omitempty"`
	// Due is when a retry's backoff ends, when the key waits for one: the
	// queue's workqueue.KeyState.Due.
	Due *time.Time `json:"due,omitempty"`
}

// notConverged returns the page of c's keys not converged at offset, of
// at most limit keys. It asks for the whole state of the keys of the page
// only (finding a queued key takes time linear in the queue's length).
func notConverged(c Controller, offset, limit int, now time.Time) NotConvergedPage {
	cands := c.Unconverged()
	p := NotConvergedPage{Controller: c.Name(), Offset: offset, Limit: limit, Total: len(cands), Keys: []NotConvergedKey{}}
	if offset >= len(cands) {
		return p
	}
	for _, cd := range cands[offset:min(offset+limit, len(cands))] {
		p.Keys = append(p.Keys, notConvergedKey(c.Key(cd.Key, now), cd.At))
	}
	return p
}

// notConvergedKey sums up s, the state of a key last moved at at.
func notConvergedKey(s KeyStatus, at time.Time) NotConvergedKey {
	k := NotConvergedKey{Namespace: s.Namespace, Name: s.Name, At: at, Retries: s.Queue.Retries}
	if s.Queue.Delayed && s.Queue.DelayReason == reconcile.ReasonRetry {
		due := s.Queue.Due
		k.Due = &due
	}
	var last *ReconcileRecord
	if len(s.History) > 0 {
		last = &s.History[0]
	}
	switch {
	case s.InFlight != nil:
		k.State = "in flight"
		k.Detail = "on worker " + strconv.Itoa(s.InFlight.Worker) + " for " + age(time.Duration(s.InFlight.RunningSeconds*float64(time.Second)))
		if last != nil && last.Error != "" {
			k.Detail += "; last error: " + last.Error
		}
	case last != nil && last.Result == resultTerminal:
		k.State, k.Detail = "failed", last.Error
	case last != nil && last.Error != "":
		k.State, k.Detail = "failing", last.Error
	case last != nil && last.Blocked != nil:
		k.State, k.Detail = reasonWords(last.Blocked.Reason), last.Blocked.Message
	case s.Queue.Delayed && s.Queue.DelayReason != reconcile.ReasonRequeue:
		k.State, k.Detail = "delayed", "next attempt at "+s.Queue.Due.UTC().Format(time.TimeOnly)
	default:
		k.State, k.Detail = "queued", "queued ("+string(s.Queue.Reason)+")"
	}
	return k
}
