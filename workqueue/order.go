package workqueue

import (
	"math"
	"time"
)

// priority is the class a key is queued in. When requests for one key merge,
// the higher priority wins.
type priority uint8

const (
	replay priority = iota
	normal
)

// first is the ordering time of a normal key pushed while no replay key
// was queued in its flow: it comes before every replay key pushed later (see
// lane.push).
const first = math.MinInt64

// entry is a queued key and its ordering time.
type entry[K comparable] struct {
	key K
	// st is the key's state in the core; nil in a dead entry.
	st *keyState
	// at is the ordering time, in nanoseconds since order.base: the push
	// time plus the replay delay for a replay entry; the push time
	// for a normal entry, or first if no replay key was queued then.
	at int64
	// queued is when the key was pushed, in nanoseconds since order.base,
	// for Queue.Stats and Queue.Inspect (at may be first or include the
	// replay delay).
	queued int64
	// dead marks a replay entry whose key was promoted to the normal
	// fifo; it is discarded when it reaches the front.
	dead bool
}

// order holds the queued keys of a core, a lane per flow, and decides which
// one Get returns next.
//
// Model: Get serves the runnable flows (a key queued, not paused, fewer
// than limit keys held) round-robin, in the order they became runnable, and
// takes the front key of the flow it serves. Inside a lane every queued key
// has an ordering time, and the front key is the one with the smallest,
// normal before replay on a tie, then first pushed. A normal push at time t
// is ordered at t, a replay push at t+delay. Time only moves forward, so
// each class, kept in its own fifo in push order, is already in order, and
// the front is one of the two fifos' fronts. Every operation on one key is
// amortized O(1), and the only map operation is the flow lookup of a key
// that gets a state (none without a Flow function): a key's lane is kept in
// its keyState, and a replay key's place in its lane too.
//
// Locking: the core's mu guards every field; every method requires it held.
//
// Invariants:
//   - Each queued key has exactly one live entry, in the lane lanes[st.lane]:
//     in normal, or in replay with its keyState's inReplay set and replaySeq
//     giving its sequence number. (The core never pushes a key that is
//     queued.)
//   - n is the sum of the lanes' len.
//   - Every runnable lane is in ring exactly once, with inRing set. ring may
//     also hold lanes that stopped being runnable (paused, at the limit,
//     emptied, dropped): they are dropped from it when they reach its front,
//     and inRing is cleared then. So each lane is in ring at most once.
//   - byName holds the live lanes. A lane dropped while workers held keys of
//     it stays in lanes (those keys' states point at it) until the last of
//     them is done, and is then freed: no key is ever pushed into it.
type order[K comparable] struct {
	base time.Time // ordering times count from here
	// delay is the replay delay, > 0. (When Options.ReplayDelay is
	// negative, Queue never requests replay priority: replay stays empty.)
	delay int64
	// flow is Options.Flow; nil puts every key in def.
	flow func(K) string
	// limit is Options.FlowLimit; <= 0 is no limit.
	limit int

	lanes  []*lane[K] // by index; nil at the indexes in free
	free   []uint32
	byName map[string]*lane[K]
	// def is the lane of flow "" while flow is nil, made on first use.
	def  *lane[K]
	ring fifo[*lane[K]]
	n    int // queued keys
}

// lane holds the queued keys of one flow, and what the queue knows of it.
type lane[K comparable] struct {
	name       string
	idx        uint32 // in order.lanes
	normal     fifo[entry[K]]
	replay     fifo[entry[K]]
	replayHead uint64 // sequence number of replay.front()
	replayLive int    // live entries in replay
	held       int    // keys of the lane held by workers
	paused     bool
	inRing     bool
	dropped    bool // by DropFlow; freed once held is 0
	waits      waitHist
}

func (l *lane[K]) len() int { return l.normal.len() + l.replayLive }

// len returns the number of queued keys.
func (o *order[K]) len() int { return o.n }

// runnable reports whether Get may take a key from l.
func (o *order[K]) runnable(l *lane[K]) bool {
	return l.len() > 0 && !l.paused && (o.limit <= 0 || l.held < o.limit)
}

// enter puts l, runnable, at the end of the ring unless it is in it, and
// reports whether Get may take a key from it.
func (o *order[K]) enter(l *lane[K]) bool {
	if !o.runnable(l) {
		return false
	}
	if !l.inRing {
		l.inRing = true
		o.ring.push(l)
	}
	return true
}

// laneOf returns the index of the lane a key k that gets a state joins:
// its flow's, made if the flow has none.
func (o *order[K]) laneOf(k K) uint32 {
	if o.flow == nil {
		if o.def == nil {
			o.newLane("")
		}
		return o.def.idx
	}
	name := o.flow(k)
	if l := o.byName[name]; l != nil {
		return l.idx
	}
	return o.newLane(name).idx
}

// named returns the live lane of flow name, or nil.
func (o *order[K]) named(name string) *lane[K] {
	if o.flow == nil {
		if name != "" {
			return o.byName[name] // a paused flow no key joins
		}
		return o.def
	}
	return o.byName[name]
}

// newLane makes the lane of flow name, which has none.
func (o *order[K]) newLane(name string) *lane[K] {
	l := &lane[K]{name: name}
	if n := len(o.free); n > 0 {
		l.idx = o.free[n-1]
		o.free = o.free[:n-1]
		o.lanes[l.idx] = l
	} else {
		l.idx = uint32(len(o.lanes))
		o.lanes = append(o.lanes, l)
	}
	if o.flow == nil && name == "" {
		o.def = l
	} else {
		if o.byName == nil {
			o.byName = make(map[string]*lane[K])
		}
		o.byName[name] = l
	}
	return l
}

// drop detaches l from its flow: it is out of byName, out of the ring once
// it reaches the front, and freed once no worker holds a key of it. It
// requires l to have no queued keys.
func (o *order[K]) drop(l *lane[K]) {
	if o.def == l {
		o.def = nil
	} else {
		delete(o.byName, l.name)
	}
	l.dropped, l.paused = true, false
	l.normal, l.replay, l.replayLive = fifo[entry[K]]{}, fifo[entry[K]]{}, 0
	if l.held == 0 {
		o.freeLane(l)
	}
}

func (o *order[K]) freeLane(l *lane[K]) {
	o.lanes[l.idx] = nil
	o.free = append(o.free, l.idx)
}

// push queues k, which is not queued, at priority p in its lane; now is the
// current ordering time. It reports whether Get may now take a key of that
// lane.
func (o *order[K]) push(k K, st *keyState, p priority, now int64) bool {
	l := o.lanes[st.lane]
	o.n++
	if p == normal {
		// While no replay key is queued, a normal key comes before
		// every replay key pushed later (ordered at least delay after
		// now), whatever its time.
		at := int64(first)
		if l.replay.len() > 0 {
			at = now
		}
		l.normal.push(entry[K]{key: k, st: st, at: at, queued: now})
		return o.enter(l)
	}
	at := now
	if at > math.MaxInt64-o.delay {
		at = math.MaxInt64 // a huge ReplayDelay must not wrap around
	} else {
		at += o.delay
	}
	st.inReplay, st.replaySeq = true, l.replayHead+uint64(l.replay.len())
	l.replayLive++
	l.replay.push(entry[K]{key: k, st: st, at: at, queued: now})
	return o.enter(l)
}

// promote moves st's key, queued at replay priority, to its lane's normal
// fifo, unless it has aged past now: its place then already comes before any
// normal key pushed now, and promotion must never move a key later.
func (o *order[K]) promote(st *keyState, now int64) {
	l := o.lanes[st.lane]
	e := l.replay.at(int(st.replaySeq - l.replayHead))
	if now >= e.at {
		return
	}
	k, queued := e.key, e.queued
	var zero K
	e.key, e.st, e.dead = zero, nil, true
	st.inReplay = false
	l.replayLive--
	l.normal.push(entry[K]{key: k, st: st, at: now, queued: queued})
	l.dropDead()
}

// next returns the lane Get takes a key from next, or nil if no lane is
// runnable. It drops the lanes that stopped being runnable from the ring's
// front.
func (o *order[K]) next() *lane[K] {
	for o.ring.len() > 0 {
		l := *o.ring.front()
		if o.runnable(l) {
			return l
		}
		l.inRing = false
		o.ring.pop()
	}
	return nil
}

// pop removes and returns the front entry of l, which next returned, and
// counts its key as held; l goes to the end of the ring if it is still
// runnable.
func (o *order[K]) pop(l *lane[K]) entry[K] {
	e := l.pop()
	o.n--
	l.held++
	if o.flow != nil && l.len() == 0 {
		// Many flows must not each keep the buffers of their largest
		// burst (see keepFIFO): an idle flow keeps minFIFO entries.
		l.normal.trim()
		l.replay.trim()
	}
	if o.ring.len() > 1 || !o.runnable(l) {
		o.ring.pop()
		l.inRing = false
		o.enter(l)
	}
	return e
}

// release counts a key of st's lane as no longer held, and reports whether
// Get may now take a key of that lane.
func (o *order[K]) release(st *keyState) bool {
	l := o.lanes[st.lane]
	l.held--
	if l.dropped {
		if l.held == 0 {
			o.freeLane(l)
		}
		return false
	}
	return o.enter(l)
}

// waiting reports whether a key queued now may be handed out later without
// a ResumeFlow: whether any is queued in a flow that is not paused.
func (o *order[K]) waiting() bool {
	for _, l := range o.lanes {
		if l != nil && !l.paused && l.len() > 0 {
			return true
		}
	}
	return false
}

// pop removes and returns the entry of l with the smallest ordering time.
// It requires l.len() > 0.
func (l *lane[K]) pop() entry[K] {
	if l.replay.len() > 0 && (l.normal.len() == 0 || l.replay.front().at < l.normal.front().at) {
		e := l.replay.pop()
		l.replayHead++
		l.replayLive--
		e.st.inReplay = false
		l.dropDead()
		return e
	}
	return l.normal.pop()
}

// dropDead restores the invariant that replay's front entry is live.
func (l *lane[K]) dropDead() {
	for l.replay.len() > 0 && l.replay.front().dead {
		l.replay.pop()
		l.replayHead++
	}
}

// each calls fn for every live entry of l, in no particular order.
func (l *lane[K]) each(fn func(*entry[K])) {
	for i := range l.normal.len() {
		fn(l.normal.at(i))
	}
	for i := range l.replay.len() {
		if e := l.replay.at(i); !e.dead {
			fn(e)
		}
	}
}

// time returns the ordering time t as a wall-clock time.
func (o *order[K]) time(t int64) time.Time { return o.base.Add(time.Duration(t)) }
