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
// was queued: it comes before every replay key pushed later (see push).
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

// order holds the queued keys of a core and decides which one Get returns
// next.
//
// Model: every queued key has an ordering time, and pop returns the key with
// the smallest one, normal before replay on a tie, then first pushed. A
// normal push at time t is ordered at t, a replay push at t+delay. Time
// only moves forward, so each class, kept in its own fifo in push order, is
// already in order, and pop only compares the two fronts: every operation is
// amortized O(1), and none touches a map (a replay key's place in replay is kept
// in its keyState).
//
// Locking: the core's mu guards every field; every method requires it held.
//
// Invariants:
//   - Each queued key has exactly one live entry: in normal, or in replay with
//     its keyState's inReplay set and replaySeq giving its sequence number. (The
//     core never pushes a key that is queued.)
//   - The replay entry with sequence number s is replay.at(int(s - replayHead)): entries
//     are numbered in push order and removed only from the front.
//   - replay's front entry, if any, is live: dead entries are dropped as soon as
//     they reach the front. replayLive counts the live replay entries, so Len counts
//     live entries exactly.
type order[K comparable] struct {
	base time.Time // ordering times count from here
	// delay is the replay delay, > 0. (When Options.ReplayDelay is
	// negative, Queue never requests replay priority: replay stays empty.)
	delay int64

	normal     fifo[entry[K]]
	replay     fifo[entry[K]]
	replayHead uint64 // sequence number of replay.front()
	replayLive int    // live entries in replay
}

// len returns the number of queued keys.
func (o *order[K]) len() int { return o.normal.len() + o.replayLive }

// push queues k, which is not queued, at priority p; now is the current
// ordering time.
func (o *order[K]) push(k K, st *keyState, p priority, now int64) {
	if p == normal {
		// While no replay key is queued, a normal key comes before
		// every replay key pushed later (ordered at least delay after
		// now), whatever its time.
		at := int64(first)
		if o.replay.len() > 0 {
			at = now
		}
		o.normal.push(entry[K]{key: k, st: st, at: at, queued: now})
		return
	}
	at := now
	if at > math.MaxInt64-o.delay {
		at = math.MaxInt64 // a huge ReplayDelay must not wrap around
	} else {
		at += o.delay
	}
	st.inReplay, st.replaySeq = true, o.replayHead+uint64(o.replay.len())
	o.replayLive++
	o.replay.push(entry[K]{key: k, st: st, at: at, queued: now})
}

// promote moves st's key, queued at replay priority, to the normal fifo,
// unless it has aged past now: its place then already comes before any
// normal key pushed now, and promotion must never move a key later.
func (o *order[K]) promote(st *keyState, now int64) {
	e := o.replay.at(int(st.replaySeq - o.replayHead))
	if now >= e.at {
		return
	}
	k, queued := e.key, e.queued
	var zero K
	e.key, e.st, e.dead = zero, nil, true
	st.inReplay = false
	o.replayLive--
	o.normal.push(entry[K]{key: k, st: st, at: now, queued: queued})
	o.dropDead()
}

// pop removes and returns the entry with the smallest ordering time. It
// requires len() > 0.
func (o *order[K]) pop() entry[K] {
	if o.replay.len() > 0 && (o.normal.len() == 0 || o.replay.front().at < o.normal.front().at) {
		e := o.replay.pop()
		o.replayHead++
		o.replayLive--
		e.st.inReplay = false
		o.dropDead()
		return e
	}
	return o.normal.pop()
}

// dropDead restores the invariant that replay's front entry is live.
func (o *order[K]) dropDead() {
	for o.replay.len() > 0 && o.replay.front().dead {
		o.replay.pop()
		o.replayHead++
	}
}

// time returns the ordering time t as a wall-clock time.
func (o *order[K]) time(t int64) time.Time { return o.base.Add(time.Duration(t)) }
