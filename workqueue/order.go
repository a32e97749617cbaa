package workqueue

import (
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// priority is the class a key is queued in. When requests for one key merge,
// the higher priority wins.
type priority uint8

const (
	background priority = iota
	normal
)

// first is the ordering time of a normal key pushed while no replay key
// was queued: it comes before every replay key pushed later (see Push).
const first = math.MinInt64

// entry is a queued key and its ordering time.
type entry[K comparable] struct {
	key K
	// at is the ordering time, in nanoseconds since order.base: the push
	// time plus the background delay for a replay entry; the push time
	// for a normal entry, or first if no replay key was queued then.
	at int64
	// queued is when the key was pushed, in nanoseconds since order.base,
	// for Queue.Stats and Queue.Inspect (at may be first or include the
	// background delay).
	queued int64
	// dead marks a replay entry whose key was promoted to the normal
	// ring; it is discarded when it reaches the front.
	dead bool
}

// order is the workqueue.Queue (the storage that client-go's Typed queue
// consults under its lock) that decides which dirty key Get returns next.
//
// Model: every queued key has an ordering time, and Pop returns the key with
// the smallest one, normal before background on a tie, then first pushed. A
// normal push at time t is ordered at t, a background push at t+delay. Time
// only moves forward, so each class, kept in its own ring in push order, is
// already in order, and Pop only compares the two fronts: every operation is
// amortized O(1).
//
// Locking: client-go calls Touch, Push, Len and Pop only with the Typed
// queue's lock held, so that lock guards every field of order. Push, Touch
// and Pop also hold view, which readers outside client-go (Queue.Stats,
// Queue.Inspect, Queue.Keys) take instead, since Typed's lock is not
// reachable; nothing else contends for view, so it costs the busy path one
// uncontended lock per call. The hint
// (priority and cause) of a Push or Touch is not an argument of
// workqueue.Queue; order takes it from hand, which hintedQueue fills under
// its own mutex, held by the same goroutine around every call into Typed
// that can Push or Touch. Push and Touch also record the key's cause in
// hand.causes, under that mutex; Pop leaves it there for Queue.Get.
//
// Invariants:
//   - Each queued key has exactly one live entry: in normal, or in bg with
//     bgIndex[key] giving its sequence number. (Typed never pushes a key
//     that is queued.)
//   - The bg entry with sequence number s is bg.at(int(s - bgHead)): entries
//     are numbered in push order and removed only from the front.
//   - bg's front entry, if any, is live: dead entries are dropped as soon as
//     they reach the front. So Len counts live entries exactly.
type order[K comparable] struct {
	clock clock.PassiveClock
	base  time.Time // ordering times count from here
	// delay is the background delay, > 0. (When Options.ReplayDelay is
	// negative, Queue never requests replay priority: bg stays empty
	// and the clock is never read.)
	delay int64
	hand  *handoff[K]

	// view guards the rings, bgIndex and bgHead for readers that do not
	// hold Typed's lock (see Locking).
	view sync.Mutex

	normal  ring[entry[K]]
	bg      ring[entry[K]]
	bgIndex map[K]uint64 // key -> sequence number of its live bg entry
	bgHead  uint64       // sequence number of bg.front()
}

func newOrder[K comparable](c clock.PassiveClock, delay time.Duration, h *handoff[K]) *order[K] {
	return &order[K]{
		clock:   c,
		base:    c.Now(),
		delay:   int64(delay),
		hand:    h,
		bgIndex: make(map[K]uint64),
	}
}

// Len returns the number of queued keys.
func (o *order[K]) Len() int { return o.normal.len() + len(o.bgIndex) }

// Push queues k, which is not queued, with the hint handed over for it, and
// records its cause.
func (o *order[K]) Push(k K) {
	h, ok := o.hand.take(k)
	if !ok {
		// Only a Push from Done of a key re-added while the queue was
		// shutting down. Never guess downwards.
		h = hintChange
	}
	o.hand.causes[k] = h.cause
	now := o.now()
	o.view.Lock()
	defer o.view.Unlock()
	if h.prio == normal {
		// While no replay key is queued, a normal key comes before
		// every replay key pushed later (ordered at least delay after
		// now), whatever its time.
		at := int64(first)
		if o.bg.len() > 0 {
			at = now
		}
		o.normal.push(entry[K]{key: k, at: at, queued: now})
		return
	}
	at := now
	if at > math.MaxInt64-o.delay {
		at = math.MaxInt64 // a huge ReplayDelay must not wrap around
	} else {
		at += o.delay
	}
	o.bgIndex[k] = o.bgHead + uint64(o.bg.len())
	o.bg.push(entry[K]{key: k, at: at, queued: now})
}

// Touch is called when k, already queued, is added again. The add's cause
// raises k's if higher. A normal add promotes a replay key; nothing else
// changes the order (a key keeps its place, as in client-go's FIFO).
func (o *order[K]) Touch(k K) {
	h, ok := o.hand.take(k)
	if !ok {
		return
	}
	if h.cause > o.hand.causes[k] {
		o.hand.causes[k] = h.cause
	}
	if h.prio != normal {
		return
	}
	o.view.Lock()
	defer o.view.Unlock()
	seq, ok := o.bgIndex[k]
	if !ok {
		return // queued as normal already
	}
	e := o.bg.at(int(seq - o.bgHead))
	now := o.now()
	if now >= e.at {
		// Aged: its place already comes before any normal key pushed now,
		// and promotion must never move a key later.
		return
	}
	e.dead = true
	delete(o.bgIndex, k)
	o.normal.push(entry[K]{key: k, at: now, queued: e.queued})
	o.dropDead()
}

// Pop removes and returns the key with the smallest ordering time. Typed
// calls it only when Len() > 0.
func (o *order[K]) Pop() K {
	o.view.Lock()
	defer o.view.Unlock()
	if o.bg.len() > 0 && (o.normal.len() == 0 || o.bg.front().at < o.normal.front().at) {
		e := o.bg.pop()
		o.bgHead++
		delete(o.bgIndex, e.key)
		o.dropDead()
		return e.key
	}
	return o.normal.pop().key
}

// dropDead restores the invariant that bg's front entry is live.
func (o *order[K]) dropDead() {
	for o.bg.len() > 0 && o.bg.front().dead {
		o.bg.pop()
		o.bgHead++
	}
}

// now returns the clock's time as an ordering time. It is monotonic with the
// real clock (Since uses the monotonic reading).
func (o *order[K]) now() int64 { return int64(o.clock.Since(o.base)) }

// time returns the ordering time t as a wall-clock time.
func (o *order[K]) time(t int64) time.Time { return o.base.Add(time.Duration(t)) }
