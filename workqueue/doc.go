// Package workqueue provides Queue, the rate-limited queue of keys that
// controller workers drain. It is built on k8s.io/client-go/util/workqueue's
// delaying and rate-limiting layers (same metrics, same rate limiters, same
// Get/Done contract) over a queue of its own, which adds two priority
// classes, so that keys from an informer's initial list or periodic resync
// do not delay keys that carry real changes, and flows (Options.Flow), so
// that a flood of keys in one flow (one cluster of many, say) does not
// delay the keys of the others, and keeps each key's state in one place, so
// that an add, a Get and a Done each take one lock and do at most one map
// operation.
//
// A Queue has the following properties:
//   - Stingy: a key added any number of times before a worker gets it is
//     handed out once.
//   - Exclusive: a key is never handed to two workers at once. A key added
//     while a worker holds it (between Get and Done) is queued again, once,
//     when the worker calls Done.
//   - Prioritized: Add queues a key at normal priority; AddReplay queues a
//     key that only comes from a list or a resync. Replay keys wait behind
//     normal keys: a replay key added at time t is ordered as if it had
//     been added at t + Options.ReplayDelay, and normal keys are ordered by
//     the time they were added. Within a class keys are first in, first out.
//   - Fair: replay keys age, so they are never starved. A replay key
//     is handed out before any normal key added more than ReplayDelay
//     after it. With a negative ReplayDelay the queue is one FIFO.
//   - Never demoted: Add of a key queued at replay priority promotes it to normal
//     priority (and never moves it later than it already was); AddReplay
//     of a key queued as normal changes nothing. A key re-added while a worker
//     holds it is queued at Done with the highest priority requested meanwhile.
//   - Reasoned: each add has a reconcile.Reason (Add: change, AddReplay:
//     replay, AddRateLimited: retry, AddAfter: requeue), kept beside the key,
//     not in it, so it never splits one key in two. GetWithReason returns the
//     most significant reason among the adds that queued the key since it
//     was last handed out (change > retry > requeue > replay); adds while a
//     worker holds the key count for its next Get.
//   - Rate limited: AddRateLimited queues a key after the delay its
//     RateLimiter chooses (by default per-key exponential backoff from 5 ms to
//     1000 s, and 10 qps with a burst of 100 overall); Forget resets a key's
//     backoff. Keys queued by AddAfter or AddRateLimited have normal priority.
//   - Postponed: a worker that took a key it cannot process yet hands it
//     back with Postpone, which queues it after a delay with the priority
//     and reason it was handed out with: a replay stays a replay (its age
//     counts again from when it comes back), a change a change.
//   - Shutdown: after ShutDown, adds are ignored, keys already queued are
//     still handed out, and Get reports shutdown once the queue is empty
//     (or holds only keys of paused flows, which it does not wait for).
//     ShutDownWithDrain also waits until workers have called Done for every
//     key they hold.
//
// Each key belongs to a flow, named by Options.Flow (every key to flow ""
// by default), which it keeps while the queue tracks it, and the queue also
// has these properties:
//   - Round-robin: Get serves the runnable flows (those with a key
//     queued, not paused and below FlowLimit) round-robin, a flow taking
//     its turn after those already waiting when it becomes runnable. With
//     k runnable flows, a flow's front key is handed out within k-1 Gets of
//     keys of other flows, however many keys those have queued.
//   - Ordered within a flow: the properties above (stingy, exclusive,
//     prioritized, aging, never demoted) hold inside each flow as in a queue
//     without flows. With Flow nil every key is in one flow, "", and the
//     queue hands keys out in exactly the order it did without flows.
//   - Bounded: workers never hold more than Options.FlowLimit keys of one
//     flow at once.
//   - Pausable: keys of a flow paused by PauseFlow are queued as usual (once
//     each, with their priority) and handed out after ResumeFlow.
//   - Droppable: DropFlow forgets a flow: its queued keys go, its delayed
//     keys are discarded when due, its held keys are forgotten at Done with
//     any adds made of them meanwhile, and their rate limiting is reset.
//     Nothing the queue owed the flow survives, so a reconcile of a dropped
//     key cannot bring it back.
//
// Workers must call Done(k) once for every k that Get returns, and Forget(k)
// once k has succeeded or been given up on. Event handlers only add keys and
// should be given the narrower Enqueuer.
//
// See the package Example for a complete worker loop.
package workqueue
