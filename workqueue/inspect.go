package workqueue

import (
	"slices"
	"strings"
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

// Stats returns the depth and the oldest key's time of each priority class,
// and the number of delayed keys (Flows has the same per flow). It takes
// the queue's lock for time linear in the number of flows and does not
// allocate; workers are not held up beyond that.
func (q *Queue[K]) Stats() Stats {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	o := &q.core.order
	s := Stats{
		Delayed:      len(q.core.delayed) - q.core.droppedDelayed,
		ShuttingDown: q.core.shuttingDown,
	}
	oldest := func(c *ClassStats, f *fifo[entry[K]]) {
		if f.len() == 0 {
			return
		}
		if t := o.time(f.front().queued); c.Oldest.IsZero() || t.Before(c.Oldest) {
			c.Oldest = t
		}
	}
	for _, l := range o.lanes {
		if l == nil {
			continue
		}
		s.Normal.Depth += l.normal.len()
		s.Replay.Depth += l.replayLive
		oldest(&s.Normal, &l.normal)
		oldest(&s.Replay, &l.replay)
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
	if d, ok := q.core.delayed[k]; ok && !d.dropped {
		s.Delayed, s.DelayReason, s.Due = true, d.hint.cause.reason(), d.due
	}
	if st := q.core.keys[k]; st != nil && st.dirty {
		s.Pending = st.processing
		o := &q.core.order
		l := o.lanes[st.lane]
		switch {
		case st.processing:
		case st.inReplay:
			e := l.replay.at(int(st.replaySeq - l.replayHead))
			s.Queued, s.Replay, s.Since = true, true, o.time(e.queued)
		default:
			for i := range l.normal.len() {
				if e := l.normal.at(i); e.st == st {
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
// order Get would hand them out if nothing changed meanwhile: the flows Get
// may take a key from round-robin, each up to its FlowLimit; then, flow by
// flow in name order, the keys Get would not hand out until something
// changes (those of paused flows and of flows at their limit). It takes
// time linear in offset+limit plus the number of flows, so that a huge
// queue can be paged.
func (q *Queue[K]) Keys(offset, limit int) []QueuedKey[K] {
	if limit <= 0 || offset < 0 {
		return nil
	}
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	o := &q.core.order
	out := make([]QueuedKey[K], 0, min(limit, o.len()))
	// emit adds e after offset, and reports whether more keys are wanted.
	emit := func(e *entry[K], inReplay bool) bool {
		if offset > 0 {
			offset--
			return true
		}
		out = append(out, QueuedKey[K]{Key: e.key, Replay: inReplay, Since: o.time(e.queued)})
		return len(out) < limit
	}
	curs := make([]laneCursor[K], len(o.lanes))
	// The runnable lanes, in ring order, served round-robin.
	var active []*laneCursor[K]
	for i := range o.ring.len() {
		if l := *o.ring.at(i); o.runnable(l) {
			c := &curs[l.idx]
			c.l, c.budget = l, -1
			if o.limit > 0 {
				c.budget = o.limit - l.held
			}
			active = append(active, c)
		}
	}
	for len(active) > 0 {
		live := active[:0]
		for _, c := range active {
			e, inReplay := c.next()
			if !emit(e, inReplay) {
				return out
			}
			if c.budget--; c.budget != 0 && c.more() {
				live = append(live, c)
			}
		}
		active = live
	}
	// The keys left, flow by flow.
	var rest []*laneCursor[K]
	for _, l := range o.lanes {
		if l == nil {
			continue
		}
		c := &curs[l.idx]
		c.l = l
		if c.more() {
			rest = append(rest, c)
		}
	}
	slices.SortFunc(rest, func(a, b *laneCursor[K]) int { return strings.Compare(a.l.name, b.l.name) })
	for _, c := range rest {
		for c.more() {
			if e, inReplay := c.next(); !emit(e, inReplay) {
				return out
			}
		}
	}
	return out
}

// laneCursor walks a lane's queued keys in the order pop takes them,
// without popping: n and b are the next entries of normal and replay.
type laneCursor[K comparable] struct {
	l      *lane[K]
	n, b   int
	budget int // keys the lane may still hand out; negative: no limit
}

// more reports whether the lane has a key after the cursor, skipping dead
// replay entries.
func (c *laneCursor[K]) more() bool {
	for c.b < c.l.replay.len() && c.l.replay.at(c.b).dead {
		c.b++
	}
	return c.n < c.l.normal.len() || c.b < c.l.replay.len()
}

// next returns the next entry, which more reported, merging the two fifos as
// pop does.
func (c *laneCursor[K]) next() (*entry[K], bool) {
	c.more()
	l := c.l
	if c.b < l.replay.len() && (c.n == l.normal.len() || l.replay.at(c.b).at < l.normal.at(c.n).at) {
		c.b++
		return l.replay.at(c.b - 1), true
	}
	c.n++
	return l.normal.at(c.n - 1), false
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
