package framework

import (
	"context"

	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/reconcile"
)

// NoteBlocked records, for the reconcile whose context is ctx, why its
// object is not converged although the reconcile did all it could (b,
// an reconcile.Blocker). The
// manager's debug endpoint keeps it with the reconcile in the key's
// history, and converge explain and the debug page print it; an object
// whose last reconcile noted a Blocker is not converged, whatever the
// reconcile returned. The last note of a reconcile wins; a Blocker without
// a Reason clears it. A reconcile that notes nothing is blocked by nothing.
// NoteBlocked does nothing when ctx does not come from a controller's
// reconcile, and is safe to call from goroutines the reconcile starts.
func NoteBlocked(ctx context.Context, b reconcile.Blocker) {
	s := reconcilelog.From(ctx)
	if s == nil {
		return
	}
	if b.Reason == "" {
		s.Blocked.Store(nil)
		return
	}
	s.Blocked.Store(&b)
}
