package workqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/converge-dev/converge/reconcile"
)

// DefaultReplayDelay is the ReplayDelay used when
// Options.ReplayDelay is zero.
const DefaultReplayDelay = 5 * time.Second

// Enqueuer is what event handlers need: a way to add keys. Give handlers an
// Enqueuer rather than the whole Queue.
type Enqueuer[K comparable] interface {
	// Add queues k at normal priority: k carries a real change.
	Add(k K)
	// AddReplay queues k at replay priority: k comes only from an
	// informer's initial list or a periodic resync.
	AddReplay(k K)
	// AddAfter queues k at normal priority once d has passed.
	AddAfter(k K, d time.Duration)
}

var (
	_ Enqueuer[string] = (*Queue[string])(nil)
	// A Queue can be handed to code written for client-go's queues.
	_ workqueue.TypedRateLimitingInterface[string] = (*Queue[string])(nil)
)

// Options configures a Queue. The zero value is a valid configuration, and
// every value of every field is valid, so Options has no validate method.
type Options[K comparable] struct {
	// Name names the queue's workqueue_* metrics (depth, adds, queue
	// latency, work duration, unfinished work, longest running processor,
	// retries), which are created through MetricsProvider.
	// Zero means unnamed: the queue records no metrics, nor does it
	// without a MetricsProvider.
	Name string

	// RateLimiter chooses the delay of AddRateLimited, and is what Forget
	// and NumRequeues act on.
	// Zero means DefaultRateLimiter[K](), a new one for this queue.
	RateLimiter workqueue.TypedRateLimiter[K]

	// MetricsProvider creates the metrics of a named queue.
	// Zero means none: the queue records no metrics. (client-go's global
	// provider, set by workqueue.SetProvider, is not consulted: pass it
	// here.)
	MetricsProvider workqueue.MetricsProvider

	// ReplayDelay is how far behind normal keys replay keys wait: a
	// key added with AddReplay at time t is ordered as if added with Add
	// at t + ReplayDelay.
	// Zero means DefaultReplayDelay (5 s). Negative means no penalty:
	// AddReplay is Add, and the queue is one FIFO.
	ReplayDelay time.Duration

	// Flow names the flow a key belongs to (for a controller of many
	// clusters, the key's cluster). Get takes keys from the flows
	// round-robin, passing over flows that have no key it may hand out
	// (none queued, paused, or at FlowLimit), so that a flow with a large
	// backlog delays another flow's key by at most one Get per other flow;
	// inside a flow keys are ordered as in a queue without flows. FlowLimit,
	// PauseFlow, ResumeFlow, DropFlow and Flows act per flow.
	//
	// The queue calls Flow when it starts tracking a key: at the key's
	// first add, or its first add after a Done that found it not added
	// again (and in DropFlow, for a key that only waits out a delay). It
	// calls it with its lock held: Flow must be quick and must not call
	// the queue. A key keeps the flow it got while the queue tracks it,
	// even if Flow would now name another. The queue keeps a record of
	// each flow it has seen (its statistics, about 1.2 KB, and room for a
	// few queued keys) until DropFlow, so Flow should map keys to a
	// bounded set of flows.
	// Zero means one flow, named "": every key is in it.
	Flow func(K) string

	// FlowLimit is the most keys of one flow that workers hold at once
	// (between Get and Done): Get skips a flow at its limit until a
	// worker calls Done for one of its keys, so that a flow whose keys are
	// slow to process (its cluster unreachable, say) cannot occupy every
	// worker. Set it below the number of workers to keep one free for the
	// other flows.
	// Zero (or negative) means no limit.
	FlowLimit int
}

func (o Options[K]) withDefaults() Options[K] {
	if o.RateLimiter == nil {
		o.RateLimiter = DefaultRateLimiter[K]()
	}
	if o.ReplayDelay == 0 {
		o.ReplayDelay = DefaultReplayDelay
	}
	if o.MetricsProvider == nil {
		o.Name = "" // no provider, no metrics: client-go must not pick its global one
	}
	return o
}

// DefaultRateLimiter returns the rate limiter a Queue uses when
// Options.RateLimiter is zero: the larger of a per-key exponential backoff
// (5 ms, doubling on each AddRateLimited of the key, capped at 1000 s, reset
// by Forget) and an overall token bucket of 10 qps with a burst of 100. It is
// client-go's DefaultTypedControllerRateLimiter. Each call returns a limiter
// with its own state; do not share one between queues unless they should
// share a budget.
func DefaultRateLimiter[K comparable]() workqueue.TypedRateLimiter[K] {
	return workqueue.DefaultTypedControllerRateLimiter[K]()
}

// Queue is a rate-limited queue of keys, drained by controller workers, with
// two priority classes and fair flows. See the package documentation for
// the ordering and the guarantees.
//
// All methods are safe for concurrent use. A worker loops on Get, processes
// the key, calls Forget on success (or when giving up) or AddRateLimited to
// retry, and always calls Done. Every key returned by Get must be passed to
// Done exactly once; until then the key is not handed to any other worker.
//
// Create a Queue with New; the zero Queue is not usable.
type Queue[K comparable] struct {
	// rl is client-go's rate-limiting queue, over its delaying queue, over
	// core. Add, AddReplay, Get, Done, Len and shutdown go to core
	// directly; the rest goes through rl.
	rl   workqueue.TypedRateLimitingInterface[K]
	core *core[K]
	// limiter is rl's rate limiter: AddRateLimited asks it for the delay
	// itself, to record when the retry is due.
	limiter workqueue.TypedRateLimiter[K]
	// replayHint is what AddReplay requests: replay priority (normal when
	// ReplayDelay is negative), cause replay.
	replayHint hint
}

// New returns a Queue configured by opts. Call ShutDown (or
// ShutDownWithDrain) when done with it, to stop its goroutines.
func New[K comparable](opts Options[K]) *Queue[K] {
	return newQueue(opts, clock.RealClock{})
}

// newQueue is New with a clock, which tests replace with a fake one.
func newQueue[K comparable](opts Options[K], c clock.WithTicker) *Queue[K] {
	opts = opts.withDefaults()
	core := newCore[K](opts, c)
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[K]{
		Name:            opts.Name,
		MetricsProvider: opts.MetricsProvider,
		Clock:           c,
		Queue:           core,
	})
	q := &Queue[K]{
		rl: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter, workqueue.TypedRateLimitingQueueConfig[K]{
			Name:            opts.Name,
			MetricsProvider: opts.MetricsProvider,
			Clock:           c,
			DelayingQueue:   delaying,
		}),
		core:       core,
		limiter:    opts.RateLimiter,
		replayHint: hint{prio: replay, cause: causeReplay},
	}
	if opts.ReplayDelay < 0 {
		q.replayHint.prio = normal
	}
	return q
}

// Add queues k at normal priority, with reason change: use it for keys that
// carry a real change. A k already queued is not queued twice; one queued at
// replay priority (by AddReplay) moves up to normal priority. If a worker
// holds k, k is queued again when the worker calls Done. After shutdown, Add
// does nothing.
func (q *Queue[K]) Add(k K) { q.core.add(k, hintChange) }

// AddReplay queues k at replay priority, with reason replay: use it
// for keys that come only from an informer's initial list or a periodic
// resync. If k is already
// queued, nothing changes. If a worker holds k, k is queued again when the
// worker calls Done (at normal priority if Add was also called meanwhile).
// After shutdown, AddReplay does nothing.
func (q *Queue[K]) AddReplay(k K) { q.core.add(k, q.replayHint) }

// AddAfter queues k at normal priority, with reason requeue, once d has
// passed (at once if d <= 0). If AddAfter is called again for k before then,
// the earlier time wins.
func (q *Queue[K]) AddAfter(k K, d time.Duration) {
	if q.core.delay(k, hint{prio: normal, cause: causeRequeue}, d) {
		q.rl.AddAfter(k, d)
	}
}

// Postpone queues k again once d has passed, with the priority and reason
// it was last handed out with (AddAfter's, normal and requeue, when no worker
// holds k): for a worker that took k and cannot process it yet, so that a
// replay stays a replay and a change a change. Call it before Done(k). If
// k is added meanwhile, the adds merge as for AddAfter.
func (q *Queue[K]) Postpone(k K, d time.Duration) {
	if q.core.postpone(k, d) {
		q.rl.AddAfter(k, d)
	}
}

// AddRateLimited queues k at normal priority, with reason retry, after the
// delay the rate limiter chooses, which grows each time it is called for k
// until Forget(k).
func (q *Queue[K]) AddRateLimited(k K) {
	// What client-go's AddRateLimited does, with the delay kept for Inspect.
	d := q.limiter.When(k)
	if q.core.delay(k, hint{prio: normal, cause: causeRetry}, d) {
		q.rl.AddAfter(k, d)
	}
}

// Forget resets k's rate limiting: the next AddRateLimited(k) starts from
// the initial delay. Call it once k has been processed successfully or given
// up on. It does not replace Done.
func (q *Queue[K]) Forget(k K) { q.rl.Forget(k) }

// NumRequeues returns how many times AddRateLimited(k) was called since the
// last Forget(k).
func (q *Queue[K]) NumRequeues(k K) int { return q.rl.NumRequeues(k) }

// Get blocks until a key is queued, removes it from the queue and returns it;
// the caller must pass it to Done once processed. It returns shutdown = true
// (and the zero K) once the queue is shut down and empty: the worker should
// then return.
func (q *Queue[K]) Get() (k K, shutdown bool) {
	k, _, shutdown = q.GetWithReason()
	return k, shutdown
}

// GetWithReason is Get, and also returns why k was queued: the most
// significant reason among the adds that queued it since it was last handed
// out (see reconcile.Reason for the order). Add gives change, AddReplay
// replay, AddRateLimited retry and AddAfter requeue. The reason is empty when
// shutdown is true.
func (q *Queue[K]) GetWithReason() (k K, r reconcile.Reason, shutdown bool) {
	k, c, shutdown := q.core.get()
	if shutdown {
		return k, "", true
	}
	return k, c.reason(), false
}

// Done marks k, returned by Get, as processed. If k was added again since
// Get, it is queued again now, once, with the highest priority requested
// since Get. If k's flow was dropped since Get, k is forgotten instead,
// with its rate limiting (as by Forget).
func (q *Queue[K]) Done(k K) {
	if q.core.done(k) {
		q.rl.Forget(k)
	}
}

// Len returns the number of queued keys, not counting keys held by workers
// or waiting for AddAfter or AddRateLimited. It is for information only:
// another goroutine may change it at any time.
func (q *Queue[K]) Len() int { return q.core.Len() }

// ShutDown makes the queue ignore adds from now on. Keys already queued are
// still handed out by Get, which reports shutdown once the queue is empty;
// keys waiting for AddAfter or AddRateLimited are dropped. ShutDown does not
// wait for workers; it may be called more than once, and may be called to
// make a ShutDownWithDrain in progress return at once.
func (q *Queue[K]) ShutDown() {
	q.core.shutDown(false)
	q.rl.ShutDown() // stops the delaying queue's goroutine
}

// ShutDownWithDrain is ShutDown, then waits until no worker holds a key:
// until every key that Get has returned has been passed to Done. It does not
// wait for keys still queued, which workers keep getting until the queue is
// empty; wait for the workers themselves when that matters. Workers must
// keep calling Done, or ShutDownWithDrain blocks for ever; ShutDown makes it
// return at once.
func (q *Queue[K]) ShutDownWithDrain() {
	q.core.shutDown(true)
	q.rl.ShutDown() // stops the delaying queue's goroutine
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been called.
func (q *Queue[K]) ShuttingDown() bool { return q.core.ShuttingDown() }
