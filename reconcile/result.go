package reconcile

import "time"

// Result is what a reconcile asks of the controller beyond its error. The zero
// Result means "done until the next change". See the package documentation for
// how each (Result, error) pair is handled.
type Result struct {
	// RequeueAfter asks for another reconcile of the same key after this long,
	// for work that is waiting on time rather than on a watched change (a
	// certificate to renew, an external system to poll). Zero means no timed
	// requeue. It is ignored when the reconcile returns an error.
	RequeueAfter time.Duration
}

// IsZero reports whether r asks for nothing beyond the next change.
func (r Result) IsZero() bool { return r == Result{} }
