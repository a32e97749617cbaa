package reconcile

// Reason says why a reconcile runs. It is reported in the reconcile's log
// lines (reason=change), in the converge_reconciles_total metric and by
// framework.ReasonFrom, and is deliberately not part of Request: two
// requests for one object are the same key whatever their reasons, so they
// still collapse into one reconcile.
//
// When a key is queued several times before a worker takes it, the
// reconcile reports the most significant reason, in this order (highest
// first): ReasonChange, ReasonRetry, ReasonRequeue, ReasonReplay. A real
// change wins because the reconcile then sees new state whatever else asked
// for it; a replay is reported only when nothing else asked.
//
// A reconciler must not depend on the reason for correctness: reconciles
// are level-triggered, and the reason is for logs, metrics and tuning.
type Reason string

const (
	// ReasonChange: a watched object changed (an add, update or delete of
	// the primary object or of an owned or mapped one).
	ReasonChange Reason = "change"
	// ReasonRetry: an earlier reconcile of the key failed (an error or a
	// panic), and this is its rate-limited retry.
	ReasonRetry Reason = "retry"
	// ReasonRequeue: an earlier reconcile asked for it with
	// Result.RequeueAfter.
	ReasonRequeue Reason = "requeue"
	// ReasonReplay: the key comes only from a replay of the cache, the
	// informer's initial list or a periodic resync, with no change seen.
	ReasonReplay Reason = "replay"
)
