package framework

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// NotConvergedPage is one page of the keys of a controller that are not
// converged, newest first: those whose last reconcile failed or noted a
// Blocker, among the keys the controller keeps a history of
// (ControllerOptions.HistoryKeys), and those a worker holds now.
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
	// Failures counts the failed reconciles since the last success.
	Failures int `json:"failures,omitempty"`
	// NextAttempt is when a retry's backoff ends, when it waits for one.
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
}

// candidate is a key the history or the workers show may not be converged,
// and when it last moved.
type candidate struct {
	req reconcile.Request
	at  time.Time
}

// notConverged returns the page of keys not converged at offset, of at
// most limit keys. It reads the last record of every key of the history and
// the keys in flight (cheap), and the whole state of the keys of the page
// only (a queue's Inspect is linear in its length).
func (c *Controller) notConverged(offset, limit int, now time.Time) NotConvergedPage {
	cands := c.notConvergedCandidates()
	p := NotConvergedPage{Controller: c.name, Offset: offset, Limit: limit, Total: len(cands), Keys: []NotConvergedKey{}}
	if offset >= len(cands) {
		return p
	}
	for _, cd := range cands[offset:min(offset+limit, len(cands))] {
		p.Keys = append(p.Keys, notConvergedKey(c.keyStatus(cd.req, now), cd.at))
	}
	return p
}

// notConvergedCandidates returns the keys that may not be converged,
// newest first.
func (c *Controller) notConvergedCandidates() []candidate {
	seen := map[reconcile.Request]int{}
	var out []candidate
	c.history.eachLast(func(req reconcile.Request, r *reconcileRecord) {
		if r.blocked == nil && r.err == "" {
			return
		}
		seen[req] = len(out)
		out = append(out, candidate{req: req, at: r.start.Add(r.took)})
	})
	c.mu.Lock()
	for _, r := range c.inflight {
		if i, ok := seen[r.req]; ok {
			out[i].at = r.begun
			continue
		}
		seen[r.req] = len(out)
		out = append(out, candidate{req: r.req, at: r.begun})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b candidate) int {
		if n := b.at.Compare(a.at); n != 0 {
			return n
		}
		return cmp.Or(cmp.Compare(a.req.Namespace, b.req.Namespace), cmp.Compare(a.req.Name, b.req.Name))
	})
	return out
}

// notConvergedKey sums up s, the state of a key last moved at at.
func notConvergedKey(s KeyStatus, at time.Time) NotConvergedKey {
	k := NotConvergedKey{Namespace: s.Namespace, Name: s.Name, At: at, Failures: s.Failures}
	if s.NextReason == string(reconcile.ReasonRetry) {
		k.NextAttempt = s.NextAttempt
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
	case s.NextAttempt != nil && s.NextReason != string(reconcile.ReasonRequeue):
		k.State, k.Detail = "delayed", "next attempt at "+s.NextAttempt.UTC().Format(time.TimeOnly)
	default:
		k.State, k.Detail = "queued", "queued ("+s.Reason+")"
	}
	return k
}
