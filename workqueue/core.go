package workqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// maxFree is how many keyStates a core keeps for reuse: enough for the keys
// a few workers finish between adds without allocating, while a burst of
// keys (a resync of a large cache, say) gives its memory back afterwards.
// (A keyState holds no pointers: allocating one is cheap, and costs the
// garbage collector no scanning.)
const maxFree = 1024

// remakeAt is how many keys the keys or delayed map of a core must have
// held before it is made anew once empty: a Go map keeps the room of the
// most keys it ever held, so a burst (a cache's first sync, the keys of a
// sharding ring's buckets postponed while they sync) would otherwise be
// paid for as long as the queue lives. Below it, the map is kept, so that
// keys coming and going do not allocate.
const remakeAt = 256

// unfinishedWorkPeriod is how often the unfinished-work gauges are updated,
// as in client-go.
const unfinishedWorkPeriod = 500 * time.Millisecond

// core is the queue under client-go's delaying and rate-limiting layers:
// client-go's Typed queue (the same dirty/processing rules, the same
// metrics) with each key's whole state in one keyState, and with the hint
// of each add (its priority and cause) passed along with the key. The
// delaying queue calls its exported methods (Add for keys whose AddAfter,
// AddRateLimited or Postpone delay has passed, with the hint delay
// recorded); Queue calls the unexported ones directly.
//
// Per key, an add, a get and a done each take mu once and do at most one
// map operation, and the only allocation is the key's keyState, when none
// is free to reuse (see maxFree).
type core[K comparable] struct {
	clock   clock.WithTicker
	metrics *coreMetrics // nil: unnamed, no metrics
	stop    chan struct{}
	stopped sync.Once
	loop    sync.WaitGroup

	mu sync.Mutex
	// ready is signalled (L is &mu) when a key is pushed and broadcast on
	// shutdown: Get waits on it. drained is broadcast (L is &mu) when the
	// last held key is done, for ShutDownWithDrain.
	ready, drained sync.Cond
	// order holds the queued keys; mu guards it.
	order order[K]
	// keys holds the state of every key that is dirty (added since it was
	// last handed out) or held by a worker; mu guards keys, free,
	// held, delayed, shuttingDown and drain.
	keys map[K]*keyState
	// free holds up to maxFree keyStates to reuse, so that keys coming and
	// going do not allocate.
	free []*keyState
	// held holds the states of the keys held by workers, each at its
	// heldAt.
	held []*keyState
	// delayed holds the merged hint and earliest due time of keys handed to
	// the delaying queue (AddAfter, AddRateLimited, Postpone) and not yet
	// added by it.
	delayed map[K]delayed
	// keysPeak and delayedPeak are the most keys the keys and delayed maps
	// held since they were made (see remakeAt).
	keysPeak, delayedPeak int
	// droppedHeld counts the held keys whose flow was dropped (their
	// keyState's dropped is set), droppedDelayed the delayed records whose
	// flow was dropped (their dropped is set).
	droppedHeld, droppedDelayed int
	// shuttingDown never goes back to false; drain is true while a
	// ShutDownWithDrain waits.
	shuttingDown, drain bool
}

// keyState is what a core keeps of one key, from its first add until it is
// done with and not added again.
//
//   - dirty: added since it was last handed out. A dirty key is queued
//     (in order) unless a worker holds it; then it is pushed at Done.
//   - hint: the merged hint of the adds since it was last handed out: the
//     cause Get returns, and for a held key the priority it is pushed with.
//   - processing: held by a worker, between Get and Done.
//   - dropped: held by a worker when DropFlow dropped its flow. Adds of it
//     are discarded until Done, which forgets it.
type keyState struct {
	dirty, processing, dropped bool
	// inReplay is true while the key's live entry is in its lane's replay
	// fifo, with sequence number replaySeq.
	inReplay bool
	hint     hint
	// out is the hint the key was last handed out with, for Postpone.
	out hint
	// lane is the index of the key's flow's lane in order.lanes, chosen
	// when the state is made and kept until it is freed. (The fields are
	// ordered so that a keyState stays in the 48-byte size class.)
	lane      uint32
	replaySeq uint64
	// heldAt is the key's index in core.held while processing.
	heldAt int
	// added is the ordering time of the first add since it was last handed
	// out, and started that of the Get that handed it out: the queue and
	// work durations of the metrics.
	added, started int64
}

// delayed is what a core keeps of a key waiting in the delaying queue: the
// merged hint it is added with once due, and when that is. A dropped record
// is one whose flow DropFlow dropped: the key is discarded when due.
type delayed struct {
	hint    hint
	due     time.Time
	dropped bool
}

// coreMetrics are the series client-go's Typed queue records.
type coreMetrics struct {
	depth                   workqueue.GaugeMetric
	adds                    workqueue.CounterMetric
	latency, workDuration   workqueue.HistogramMetric
	unfinished, longestWork workqueue.SettableGaugeMetric
}

// newCore returns an empty core. opts must have its defaults applied.
func newCore[K comparable](opts Options[K], c clock.WithTicker) *core[K] {
	q := &core[K]{
		clock:   c,
		stop:    make(chan struct{}),
		keys:    make(map[K]*keyState),
		delayed: make(map[K]delayed),
		order: order[K]{
			base:  c.Now(),
			delay: int64(opts.ReplayDelay),
			flow:  opts.Flow,
			limit: opts.FlowLimit,
		},
	}
	q.ready.L, q.drained.L = &q.mu, &q.mu
	if mp := opts.MetricsProvider; opts.Name != "" && mp != nil {
		q.metrics = &coreMetrics{
			depth:        mp.NewDepthMetric(opts.Name),
			adds:         mp.NewAddsMetric(opts.Name),
			latency:      mp.NewLatencyMetric(opts.Name),
			workDuration: mp.NewWorkDurationMetric(opts.Name),
			unfinished:   mp.NewUnfinishedWorkSecondsMetric(opts.Name),
			longestWork:  mp.NewLongestRunningProcessorSecondsMetric(opts.Name),
		}
		q.loop.Go(q.updateUnfinishedWorkLoop)
	}
	return q
}

// now returns the clock's time as an ordering time. It reads only the
// monotonic clock (Since of a time with a monotonic reading).
func (q *core[K]) now() int64 { return int64(q.clock.Since(q.order.base)) }

// add queues k with hint h, merged with any hint already requested.
func (q *core[K]) add(k K, h hint) {
	q.mu.Lock()
	q.addLocked(k, h)
	q.mu.Unlock()
}

func (q *core[K]) addLocked(k K, h hint) {
	if q.shuttingDown {
		return
	}
	st := q.keys[k]
	if st == nil {
		st = q.newState()
		st.lane = q.order.laneOf(k)
		q.keys[k] = st
		q.keysPeak = max(q.keysPeak, len(q.keys))
	} else if st.dropped {
		return // forgotten at Done
	}
	if st.dirty {
		st.hint = st.hint.merge(h)
		// A held key is pushed at Done with the merged hint. A queued key
		// keeps its place, but a normal add promotes a replay key.
		if !st.processing && h.prio == normal && st.inReplay {
			q.order.promote(st, q.now())
		}
		return
	}
	now := q.now()
	st.dirty, st.hint, st.added = true, h, now
	if m := q.metrics; m != nil {
		m.adds.Inc()
		m.depth.Inc()
	}
	if st.processing {
		return
	}
	if q.order.push(k, st, h.prio, now) {
		q.ready.Signal()
	}
}

// newState returns a zero keyState, reused when one is free.
func (q *core[K]) newState() *keyState {
	if n := len(q.free); n > 0 {
		st := q.free[n-1]
		q.free = q.free[:n-1]
		return st
	}
	return new(keyState)
}

// get blocks until a key is queued or the queue shuts down empty, and hands
// the key out with the cause it was queued with.
func (q *core[K]) get() (k K, c cause, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var l *lane[K]
	for {
		if l = q.order.next(); l != nil {
			break
		}
		// After shutdown, wait only for keys that can become runnable
		// without a ResumeFlow: those of flows at their limit.
		if q.shuttingDown && !q.order.waiting() {
			return k, 0, true
		}
		q.ready.Wait()
	}
	e := q.order.pop(l)
	st := e.st
	st.dirty, st.processing, st.out = false, true, st.hint
	st.heldAt = len(q.held)
	q.held = append(q.held, st)
	if m := q.metrics; m != nil || q.order.flow != nil {
		now := q.now()
		l.waits.observe(now - st.added)
		if m != nil {
			st.started = now
			m.depth.Dec()
			m.latency.Observe(time.Duration(st.started - st.added).Seconds())
		}
	}
	return e.key, st.hint.cause, false
}

// done marks k, handed out by get, as processed; if k was added meanwhile,
// it is queued again with the hint of those adds. A k that is not held is
// ignored. It reports whether k's flow was dropped while k was held: k is
// then forgotten, and its rate limiting must be too.
func (q *core[K]) done(k K) (dropped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.keys[k]
	if st == nil || !st.processing {
		return false
	}
	st.processing = false
	last := q.held[len(q.held)-1]
	q.held[st.heldAt], last.heldAt = last, st.heldAt
	q.held[len(q.held)-1] = nil
	q.held = q.held[:len(q.held)-1]
	var now int64
	if m := q.metrics; m != nil {
		now = q.now()
		m.workDuration.Observe(time.Duration(now - st.started).Seconds())
	}
	if q.order.release(st) {
		q.ready.Signal() // the flow was at its limit
	}
	dropped = st.dropped
	switch {
	case dropped:
		q.droppedHeld--
		q.forgetLocked(k, st)
	case st.dirty:
		if q.metrics == nil {
			now = q.now()
		}
		if q.order.push(k, st, st.hint.prio, now) {
			q.ready.Signal()
		}
	default:
		q.forgetLocked(k, st)
	}
	if len(q.held) == 0 && q.drain {
		q.drained.Broadcast()
	}
	return dropped
}

// forgetLocked deletes the state st of k, which is neither queued nor held.
func (q *core[K]) forgetLocked(k K, st *keyState) {
	delete(q.keys, k)
	if len(q.keys) == 0 && q.keysPeak >= remakeAt {
		q.keys, q.keysPeak = make(map[K]*keyState), 0
	}
	if len(q.free) < maxFree {
		*st = keyState{}
		q.free = append(q.free, st)
	}
}

// delay records that k is about to be handed to the delaying queue with
// hint h, to be added after d, for Add to find when the delay has passed
// and Inspect to report meanwhile. It reports false when k must not be
// handed to the delaying queue: a worker holds k and k's flow was dropped.
func (q *core[K]) delay(k K, h hint, d time.Duration) bool {
	due := q.clock.Now().Add(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return true // the delaying queue drops it
	}
	if q.droppedHeld > 0 {
		if st := q.keys[k]; st != nil && st.dropped {
			return false
		}
	}
	old, ok := q.delayed[k]
	if !ok {
		q.delayed[k] = delayed{hint: h, due: due}
		q.delayedPeak = max(q.delayedPeak, len(q.delayed))
		return true
	}
	if old.dropped {
		// The dropped delay asked for nothing that still counts.
		q.droppedDelayed--
		old.dropped, old.hint = false, h
	} else {
		old.hint = old.hint.merge(h)
	}
	// The delaying queue keeps the earlier time of two delays of one key.
	if due.Before(old.due) {
		old.due = due
	}
	q.delayed[k] = old
	return true
}

// postpone is delay with the hint k was handed out with, when a worker
// holds k, and a requeue's otherwise.
func (q *core[K]) postpone(k K, d time.Duration) bool {
	h := hint{prio: normal, cause: causeRequeue}
	q.mu.Lock()
	if st := q.keys[k]; st != nil && st.processing {
		h = st.out
	}
	q.mu.Unlock()
	return q.delay(k, h, d)
}

// eachOwed calls fn for each key queued, held or delayed, with the most
// significant cause among its adds (for a held key, also the one it was
// handed out with), with mu held.
func (q *core[K]) eachOwed(fn func(K, cause)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, st := range q.keys {
		if st.dropped {
			continue
		}
		c := st.hint.cause
		if st.processing {
			c = st.out.cause
			if st.dirty {
				c = max(c, st.hint.cause)
			}
		}
		if d, ok := q.delayed[k]; ok && !d.dropped {
			c = max(c, d.hint.cause)
		}
		fn(k, c)
	}
	for k, d := range q.delayed {
		if !d.dropped && q.keys[k] == nil {
			fn(k, d.hint.cause)
		}
	}
}

// shutDown makes the core ignore adds and wakes every Get; with drain, it
// then waits until no key is held (or a later shutDown without drain).
func (q *core[K]) shutDown(drain bool) {
	q.stopped.Do(func() { close(q.stop) })
	q.loop.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shuttingDown, q.drain = true, drain
	clear(q.delayed) // the delaying queue drops the keys it waits on
	q.droppedDelayed = 0
	q.ready.Broadcast()
	if !drain {
		q.drained.Broadcast()
		return
	}
	for len(q.held) > 0 && q.drain {
		q.drained.Wait()
	}
}

// updateUnfinishedWorkLoop sets the unfinished-work gauges every
// unfinishedWorkPeriod until shutdown.
func (q *core[K]) updateUnfinishedWorkLoop() {
	t := q.clock.NewTicker(unfinishedWorkPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			q.updateUnfinishedWork()
		case <-q.stop:
			return
		}
	}
}

func (q *core[K]) updateUnfinishedWork() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	now := q.now()
	var total, oldest time.Duration
	for _, st := range q.held {
		age := time.Duration(now - st.started)
		total += age
		oldest = max(oldest, age)
	}
	q.metrics.unfinished.Set(total.Seconds())
	q.metrics.longestWork.Set(oldest.Seconds())
}

// The methods below make core the workqueue.TypedInterface the delaying
// queue wraps.

// Add queues k with the hint delay recorded for it (normal priority, except
// for a replay that Postpone delayed). The delaying queue calls it for keys
// whose AddAfter, AddRateLimited or Postpone delay has passed; the hint is
// consumed here. (Delays of one key that the delaying queue merges share
// one record; a fire that finds none, which only a race of delayed adds of
// k can cause, is a requeue.)
func (q *core[K]) Add(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h := hint{prio: normal, cause: causeRequeue}
	if d, ok := q.delayed[k]; ok {
		delete(q.delayed, k)
		if len(q.delayed) == 0 && q.delayedPeak >= remakeAt {
			q.delayed, q.delayedPeak = make(map[K]delayed), 0
		}
		if d.dropped {
			q.droppedDelayed--
			return
		}
		h = d.hint
	}
	q.addLocked(k, h)
}

// Len returns the number of queued keys.
func (q *core[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.order.len()
}

// Get is get without the cause.
func (q *core[K]) Get() (K, bool) {
	k, _, shutdown := q.get()
	return k, shutdown
}

// Done is done.
func (q *core[K]) Done(k K) { q.done(k) }

// ShutDown does nothing. The delaying queue calls it from its own ShutDown
// before stopping its goroutine; Queue shuts the core down itself (with
// shutDown) and only then shuts the delaying queue down, to stop that
// goroutine. Going through here would make ShutDownWithDrain end with a
// ShutDown, which cuts short any other ShutDownWithDrain still waiting.
func (q *core[K]) ShutDown() {}

// ShutDownWithDrain does nothing, for the reason ShutDown does nothing.
func (q *core[K]) ShutDownWithDrain() {}

// ShuttingDown reports whether the core was shut down.
func (q *core[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}
