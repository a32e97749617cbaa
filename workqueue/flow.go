package workqueue

import (
	"math/bits"
	"slices"
	"strings"
	"time"
)

// FlowStats describes one flow of a Queue (see Options.Flow), as Flows
// returns it.
type FlowStats struct {
	// Flow is the flow's name.
	Flow string `json:"flow"`
	// Queued is the number of the flow's keys waiting for a worker, and
	// Held the number held by workers (between Get and Done).
	Queued int `json:"queued"`
	Held   int `json:"held"`
	// Paused reports whether PauseFlow paused the flow.
	Paused bool `json:"paused,omitempty"`
	// WaitP50 and WaitP99 are the median and 99th percentile of how long
	// the flow's keys waited, from their add to the Get that handed them
	// out, over every Get of the flow since the queue first saw it (or
	// DropFlow last dropped it). They are read from a histogram with four
	// buckets per doubling from 1 µs, as the bucket's upper bound: at most
	// 25% (or 1 µs) above the true value. The queue reads the clock at Get
	// only with a Flow function or metrics, so they are zero without
	// either.
	WaitP50 time.Duration `json:"waitP50"`
	WaitP99 time.Duration `json:"waitP99"`
}

// Flows returns the stats of each flow the queue has a record of (see
// Options.Flow), sorted by name: with Flow nil, the one flow "" once a key
// was added. It takes the queue's lock for time linear in the number of
// flows.
func (q *Queue[K]) Flows() []FlowStats {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.order.flowStats()
}

// PauseFlow stops Get from handing out keys of flow until ResumeFlow(flow).
// Keys of the flow added meanwhile are queued as usual (each at most once,
// with its priority and reason), and count in Len; keys held by workers are
// not affected. Pausing a flow no key is in yet records the pause, so keys
// of the flow wait from their first add. After ShutDown, keys of a paused
// flow are never handed out unless it is resumed: Get reports shutdown
// once every key still queued is in a paused flow.
func (q *Queue[K]) PauseFlow(flow string) { q.core.pause(flow) }

// ResumeFlow ends PauseFlow(flow): Get hands its queued keys out again,
// round-robin with the other flows, and wakes the Gets waiting. Resuming a
// flow that is not paused, or that the queue has no record of, does
// nothing.
func (q *Queue[K]) ResumeFlow(flow string) { q.core.resume(flow) }

// DropFlow forgets flow and every key the queue owes in it, and returns how
// many keys it dropped:
//   - its queued keys are removed;
//   - its keys waiting out the delay of AddAfter, AddRateLimited or
//     Postpone are discarded when the delay passes;
//   - its keys held by workers are not queued again at Done, and adds of
//     them (Add, AddAfter, AddRateLimited, Postpone) before Done are
//     discarded: the reconcile of a dropped key cannot bring it back;
//   - rate limiting is reset (as by Forget) for each of them, for held keys
//     at Done;
//   - the flow's pause and statistics are forgotten.
//
// Keys of the flow added afterwards (and not held by a worker since before
// DropFlow) start the flow anew: not paused, and with the held keys of the
// dropped flow not counted toward its FlowLimit. Dropping a flow the queue has no record of
// drops its delayed keys, if any, and returns their number.
func (q *Queue[K]) DropFlow(flow string) int {
	n, forget := q.core.dropFlow(flow)
	for _, k := range forget {
		q.rl.Forget(k)
	}
	return n
}

func (q *core[K]) pause(flow string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.order.named(flow)
	if l == nil {
		l = q.order.newLane(flow)
	}
	l.paused = true // the ring drops it when it reaches the front
}

func (q *core[K]) resume(flow string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.order.named(flow)
	if l == nil || !l.paused {
		return
	}
	l.paused = false
	if q.order.enter(l) {
		q.ready.Broadcast() // a Get for each key, up to the limit
	}
}

// dropFlow does DropFlow's work under the lock, and returns the number of
// keys dropped and those to Forget now (held keys are forgotten at Done).
func (q *core[K]) dropFlow(flow string) (n int, forget []K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	o := &q.order
	l := o.named(flow)
	// Delayed keys first, while the queued ones still have their states.
	for k, d := range q.delayed {
		if d.dropped {
			continue
		}
		if st := q.keys[k]; st != nil {
			if l == nil || st.lane != l.idx {
				continue
			}
		} else if o.flowOf(k) != flow {
			continue
		} else {
			n++
			forget = append(forget, k)
		}
		d.dropped = true
		q.delayed[k] = d
		q.droppedDelayed++
	}
	if l == nil {
		return n, forget
	}
	for _, st := range q.held {
		if st.lane != l.idx || st.dropped {
			continue
		}
		n++
		st.dropped = true
		q.droppedHeld++
		if st.dirty {
			st.dirty = false
			if m := q.metrics; m != nil {
				m.depth.Dec()
			}
		}
	}
	l.each(func(e *entry[K]) {
		n++
		forget = append(forget, e.key)
		q.forgetLocked(e.key, e.st)
		if m := q.metrics; m != nil {
			m.depth.Dec()
		}
	})
	o.n -= l.len()
	o.drop(l)
	return n, forget
}

// flowOf returns the flow of k.
func (o *order[K]) flowOf(k K) string {
	if o.flow == nil {
		return ""
	}
	return o.flow(k)
}

// flowStats returns the stats of every flow the queue has a record of,
// sorted by name.
func (o *order[K]) flowStats() []FlowStats {
	var out []FlowStats
	for _, l := range o.lanes {
		if l == nil || l.dropped {
			continue
		}
		out = append(out, FlowStats{
			Flow:    l.name,
			Queued:  l.len(),
			Held:    l.held,
			Paused:  l.paused,
			WaitP50: l.waits.quantile(0.50),
			WaitP99: l.waits.quantile(0.99),
		})
	}
	slices.SortFunc(out, func(a, b FlowStats) int { return strings.Compare(a.Flow, b.Flow) })
	return out
}

// waitOctaves is how many doublings of 1 µs waitHist tells apart: 2^36 µs
// is about 19 hours; longer waits share the last bucket.
const waitOctaves = 36

// waitHist counts waits in buckets of a quarter of a doubling: [0, 1),
// [1, 2), [2, 3), [3, 4) µs, then [4, 5), [5, 6), [6, 7), [7, 8), [8, 10),
// [10, 12), … µs.
type waitHist struct {
	n       uint64
	buckets [4 * waitOctaves]uint64
}

// observe counts a wait of d nanoseconds.
func (h *waitHist) observe(d int64) {
	us := uint64(max(d, 0)) / 1000
	i := us
	if us >= 4 {
		e := uint64(bits.Len64(us) - 1) // 2^e <= us < 2^(e+1), e >= 2
		i = 4*(e-1) + (us>>(e-2))&3
	}
	h.buckets[min(i, uint64(len(h.buckets)-1))]++
	h.n++
}

// quantile returns the upper bound of the bucket holding the q-quantile
// wait, or zero when nothing was observed.
func (h *waitHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.buckets {
		if seen += c; seen >= rank {
			return bucketBound(i)
		}
	}
	return bucketBound(len(h.buckets) - 1)
}

// bucketBound returns the upper bound of waitHist bucket i.
func bucketBound(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	e, m := i/4+1, i%4
	return time.Duration((5+m)<<(e-2)) * time.Microsecond
}
