package reconcilelog

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/reconcile"
)

// Call runs r.Reconcile, turning a panic into an error: the first line of
// the panic's value, which the history shows; ctx's logger gets the whole
// value and the stack.
func Call(ctx context.Context, r reconcile.Reconciler, req reconcile.Request) (res reconcile.Result, err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			whole := fmt.Errorf("panic: %v", v)
			if e, ok := v.(error); ok {
				whole = fmt.Errorf("panic: %w", e)
			}
			logr.FromContextOrDiscard(ctx).Error(errtext.Error(whole), "reconcile panicked; retrying with backoff", "stack", string(debug.Stack()))
			first, _, _ := strings.Cut(whole.Error(), "\n")
			err = &panicError{first: first, whole: whole}
		}
	}()
	res, err = r.Reconcile(ctx, req)
	return res, err, false
}

// panicError is a reconcile's panic as its history shows it: the first
// line of its value (a stack a value carries goes to the log only).
type panicError struct {
	first string
	whole error
}

func (e *panicError) Error() string { return e.first }
func (e *panicError) Unwrap() error { return e.whole }
