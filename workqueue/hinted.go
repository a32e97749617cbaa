package workqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// hintedQueue is client-go's Typed queue, storing its keys in an order, with
// every path that can call order.Push or order.Touch wrapped so that the
// hint of the add (its priority and cause) reaches order.
//
// It is the queue under client-go's delaying and rate-limiting layers, which
// call its Add (for AddAfter and AddRateLimited: normal priority); Queue
// calls add directly for Add and AddReplay.
//
// Why mu is held across the calls into Typed, instead of a hint being
// stored before Typed.Add for Push or Touch to find: an add takes effect
// inside Typed.Add, under Typed's lock, and a stored hint can be consumed by
// someone else's Push first. A normal Add(k) could store its hint and lose
// it to another goroutine's Push of k; a worker could then Get k, and a
// replay add store its lower hint; the normal Add, reaching Typed while
// k is held, would have no say at Done, and a real change would be queued
// as background. Holding mu across Typed.Add and Typed.Done makes each add's
// priority reach exactly the Push or Touch it causes, or pending.
//
// Lock order: mu, then Typed's lock. order's methods run under Typed's lock
// and never take mu: Push and Touch run only inside Typed.Add and Typed.Done,
// called from add and Done with mu held, and Pop and Len (from Get and Len)
// do not read hand.
type hintedQueue[K comparable] struct {
	*workqueue.Typed[K]
	clock clock.PassiveClock
	// order is Typed's storage, read by Queue's introspection methods.
	order *order[K]

	mu   sync.Mutex
	hand handoff[K] // mu guards hand
}

// newHintedQueue returns a Typed queue storing its keys in an order.
// opts must have its defaults applied.
func newHintedQueue[K comparable](opts Options[K], c clock.WithTicker) *hintedQueue[K] {
	q := &hintedQueue[K]{clock: c, hand: handoff[K]{
		pending: make(map[K]hint),
		causes:  make(map[K]cause),
		delayed: make(map[K]delayed),
	}}
	q.order = newOrder(c, opts.ReplayDelay, &q.hand)
	q.Typed = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[K]{
		Name:            opts.Name,
		MetricsProvider: opts.MetricsProvider,
		Clock:           c,
		Queue:           q.order,
	})
	return q
}

// Add queues k with normal priority. The delaying queue calls it for keys
// whose AddAfter or AddRateLimited delay has passed; the cause recorded by
// delay for k is consumed here. (Delays of one key that the delaying queue
// merges share one record; a fire that finds none, which only a race of
// delayed adds of k can cause, is a requeue.)
func (q *hintedQueue[K]) Add(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := causeRequeue
	if d, ok := q.hand.delayed[k]; ok {
		delete(q.hand.delayed, k)
		c = d.cause
	}
	q.addLocked(k, hint{prio: normal, cause: c})
}

// delay records that k is about to be handed to the delaying queue with
// cause c, to be added after d, for Add to find when the delay has passed
// and Inspect to report meanwhile.
func (q *hintedQueue[K]) delay(k K, c cause, d time.Duration) {
	due := q.clock.Now().Add(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	old, ok := q.hand.delayed[k]
	if !ok {
		q.hand.delayed[k] = delayed{cause: c, due: due}
		return
	}
	// The delaying queue keeps the earlier time of two delays of one key.
	if due.Before(old.due) {
		old.due = due
	}
	old.cause = max(old.cause, c)
	q.hand.delayed[k] = old
}

// add queues k with hint h, merged with any hint already requested.
func (q *hintedQueue[K]) add(k K, h hint) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(k, h)
}

func (q *hintedQueue[K]) addLocked(k K, h hint) {
	q.hand.adding, q.hand.hint = true, h
	q.Typed.Add(k)
	if !q.hand.adding {
		return // Push or Touch took h
	}
	q.hand.adding = false
	// Typed.Add neither pushed nor touched k: either a worker holds k and
	// Typed will push it at Done, or the queue is shutting down and dropped
	// k. ShuttingDown never goes back to false, so false here means the
	// former, and h must wait in pending for that Push. When shutting down,
	// dropping h is safe: a Push without a hint is a normal change.
	if q.Typed.ShuttingDown() {
		return
	}
	if old, ok := q.hand.pending[k]; ok {
		h = h.merge(old)
	}
	q.hand.pending[k] = h
}

// takeCause returns the cause k was queued with, which Get has just popped,
// and forgets it. Nothing can push k again before the caller passes it to
// Done, so the entry Push left is still there.
func (q *hintedQueue[K]) takeCause(k K) cause {
	q.mu.Lock()
	defer q.mu.Unlock()
	c, ok := q.hand.causes[k]
	if !ok {
		return causeChange
	}
	delete(q.hand.causes, k)
	return c
}

// Done marks k as processed; if k was re-added meanwhile, Typed pushes it,
// with the priority waiting in pending.
func (q *hintedQueue[K]) Done(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.Typed.Done(k)
}

// ShutDown does nothing. The delaying queue calls it from its own ShutDown
// before stopping its goroutine; Queue shuts Typed down itself (with
// Typed.ShutDown or Typed.ShutDownWithDrain) and only then shuts the
// delaying queue down, to stop that goroutine. Going through here would make
// ShutDownWithDrain end with a Typed.ShutDown, which cuts short any other
// ShutDownWithDrain still waiting.
func (q *hintedQueue[K]) ShutDown() {}

// handoff carries the hint of an add (priority and cause) from hintedQueue
// to order, across client-go code that has no parameter for it, and keeps
// each queued key's cause until Get hands it out. hintedQueue.mu guards
// every field, and is held by the goroutine that runs order.Push and
// order.Touch.
type handoff[K comparable] struct {
	// adding is true while hintedQueue.add is inside Typed.Add, which calls
	// Push or Touch at most once, for that key; hint is that add's hint.
	adding bool
	hint   hint
	// pending holds the merged hint of each key re-added while a worker
	// holds it. Typed pushes such a key at Done, which consumes the entry;
	// nothing else adds or removes entries, so pending only holds keys that
	// are being processed and were re-added.
	pending map[K]hint
	// causes holds the merged cause of each queued key (set by Push, raised
	// by Touch), and of each key Get has popped until Queue.Get takes it.
	causes map[K]cause
	// delayed holds the merged cause and earliest due time of keys handed to
	// the delaying queue (AddAfter, AddRateLimited) and not yet added by it.
	delayed map[K]delayed
}

// delayed is what handoff keeps of a key waiting in the delaying queue.
type delayed struct {
	cause cause
	due   time.Time
}

// take returns the hint of the Push or Touch of k that is in progress,
// consuming it; ok is false when none was handed over.
func (h *handoff[K]) take(k K) (hi hint, ok bool) {
	if h.adding {
		h.adding = false
		return h.hint, true
	}
	if hi, ok = h.pending[k]; ok {
		delete(h.pending, k)
	}
	return hi, ok
}
