package workqueue

import (
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// Stats is a snapshot of a Queue's contents, for monitoring and debugging.
// Another goroutine may change the queue at any time after it is taken.
// Its JSON is a controller's queue on the manager's debug endpoint.
type Stats struct {
	// Normal and Replay are the keys queued in each priority class.
	Normal ClassStats `json:"normal"`
	Replay ClassStats `json:"replay"`
	// Delayed is the number of keys waiting for the delay of AddAfter,
	// AddRateLimited or Postpone to pass.
	Delayed int `json:"delayed"`
	// ShuttingDown reports whether ShutDown has been called.
	ShuttingDown bool `json:"shuttingDown"`
}

// ClassStats describes the keys queued in one priority class.
type ClassStats struct {
	// Depth is the number of keys queued in the class.
	Depth int `json:"depth"`
	// Oldest is when the key Get would hand out first in the class was
	// queued: the oldest key of the class (a replay key promoted by Add
	// keeps its first time but joins the end of the normal class). Zero
	// when Depth is 0.
	Oldest time.Time `json:"oldest,omitzero"`
}

// KeyState is where one key stands in a Queue (its JSON is a key's queue
// on the manager's debug endpoint). A key held by a worker is
// neither queued nor delayed unless it was added again meanwhile (then it
// is queued at Done, and Pending is true).
type KeyState struct {
	// Queued is true when the key waits for a worker; Replay says it
	// waits at replay priority, Since since when, and Reason why (the
	// most significant reason of the adds that queued it).
	Queued bool             `json:"queued"`
	Replay bool             `json:"replay,omitempty"`
	Since  time.Time        `json:"since,omitzero"`
	Reason reconcile.Reason `json:"reason,omitempty"`

	// Pending is true when the key was added while a worker holds it: it is
	// queued again when the worker calls Done.
	Pending bool `json:"pending,omitempty"`

	// Delayed is true when the key waits for the delay of AddAfter
	// (DelayReason requeue), AddRateLimited (retry) or Postpone (the reason
	// it was handed out with) to pass, due at Due (the earliest delay
	// requested).
	Delayed     bool             `json:"delayed"`
	DelayReason reconcile.Reason `json:"delayReason,omitempty"`
	Due         time.Time        `json:"due,omitzero"`

	// Retries is NumRequeues: how many times AddRateLimited was called for
	// the key since its last Forget.
	Retries int `json:"retries"`
}

// QueuedKey is a key waiting in a Queue, as Keys lists it.
type QueuedKey[K comparable] struct {
	Key    K         `json:"key"`
	Replay bool      `json:"replay"`
	Since  time.Time `json:"since"`
}

// Stats returns the depth and the oldest key's age of each priority class,
// and the number of delayed keys. It takes the queue's lock briefly and
// does not allocate; workers are not held up beyond that.
func (q *Queue[K]) Stats() Stats {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	o := &q.core.order
	s := Stats{
		Normal:       ClassStats{Depth: o.normal.len()},
		Replay:       ClassStats{Depth: o.replayLive},
		Delayed:      len(q.core.delayed),
		ShuttingDown: q.core.shuttingDown,
	}
	if o.normal.len() > 0 {
		s.Normal.Oldest = o.time(o.normal.front().queued)
	}
	if o.replay.len() > 0 {
		s.Replay.Oldest = o.time(o.replay.front().queued)
	}
	return s
}

// Inspect returns where k stands in the queue. Finding a normal-priority
// key takes time linear in the number of queued keys (the queue keeps no
// index of them, to keep Add and Get cheap): Inspect is for debugging, not
// for the reconcile path.
func (q *Queue[K]) Inspect(k K) KeyState {
	var s KeyState
	q.core.mu.Lock()
	if d, ok := q.core.delayed[k]; ok {
		s.Delayed, s.DelayReason, s.Due = true, d.hint.cause.reason(), d.due
	}
	if st := q.core.keys[k]; st != nil && st.dirty {
		s.Pending = st.processing
		o := &q.core.order
		switch {
		case st.processing:
		case st.inReplay:
			e := o.replay.at(int(st.replaySeq - o.replayHead))
			s.Queued, s.Replay, s.Since = true, true, o.time(e.queued)
		default:
			for i := range o.normal.len() {
				if e := o.normal.at(i); e.st == st {
					s.Queued, s.Since = true, o.time(e.queued)
					break
				}
			}
		}
		if s.Queued {
			s.Reason = st.hint.cause.reason()
		}
	}
	q.core.mu.Unlock()
	s.Retries = q.NumRequeues(k)
	return s
}

// Keys returns up to limit queued keys, skipping the first offset, in the
// order Get would hand them out if nothing changed meanwhile. It takes time
// linear in offset+limit, so that a huge queue can be paged.
func (q *Queue[K]) Keys(offset, limit int) []QueuedKey[K] {
	if limit <= 0 || offset < 0 {
		return nil
	}
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	o := &q.core.order
	out := make([]QueuedKey[K], 0, min(limit, o.len()))
	// Merge the two fifos as pop does, without popping.
	n, b := 0, 0
	for len(out) < limit {
		for b < o.replay.len() && o.replay.at(b).dead {
			b++
		}
		var e *entry[K]
		inReplay := false
		switch {
		case b < o.replay.len() && (n == o.normal.len() || o.replay.at(b).at < o.normal.at(n).at):
			e, inReplay = o.replay.at(b), true
			b++
		case n < o.normal.len():
			e = o.normal.at(n)
			n++
		default:
			return out
		}
		if offset > 0 {
			offset--
			continue
		}
		out = append(out, QueuedKey[K]{Key: e.key, Replay: inReplay, Since: o.time(e.queued)})
	}
	return out
}

// owed calls fn for every key the queue still owes a worker: queued, held
// by a worker, or waiting out a delay (AddAfter, AddRateLimited,
// Postpone). r is the reason it is owed for: the most significant among
// the adds it waits for and, for a key a worker holds, the reason it was
// handed out with; a key owed with ReasonReplay was asked for only by
// replays. fn runs with the queue's lock held, so it must be quick and must
// not call the queue; the order of the keys is unspecified. It takes time
// linear in the number of keys the queue tracks: it is for rare
// bookkeeping (a sharded controller handing a bucket over), not for the
// reconcile path.
func (q *Queue[K]) owed(fn func(k K, r reconcile.Reason)) {
	q.core.eachOwed(func(k K, c cause) { fn(k, c.reason()) })
}
