package declarative

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/reconcile"
)

// desired calls the Reconciler's Desired for parent, recovering a panic.
func (d *Declarative[T]) desired(ctx context.Context, parent T) (state State, err error, p *recoveredPanic) {
	defer func() {
		if r := recover(); r != nil {
			p = &recoveredPanic{value: r, stack: debug.Stack()}
		}
	}()
	state, err = d.r.Desired(withLive(ctx, d, parent), parent)
	return state, err, nil
}

// desiredFailed finishes a reconcile whose Desired returned err, or
// panicked (p): nothing is applied or deleted; the Ready condition (see
// setReadyCondition) and the reconcile's Blocker say so, with reason
// DesiredFailedReason and the error (said as errtext.Of says it: without
// the values the API server quotes, on one line) or the panic's first
// line; a Warning Event of that reason does too when it is new (see
// reportInvalid). Then err goes to the framework unchanged, and a panic
// panics on, with the stack of Desired, for the framework to count, log
// and retry.
func (d *Declarative[T]) desiredFailed(ctx context.Context, parent T, err error, p *recoveredPanic) error {
	msg := errtext.Of(err)
	var terminal *reconcile.TerminalError
	if errors.As(err, &terminal) && terminal.Err != nil {
		msg = errtext.Of(terminal.Err) // the condition says why, not how it is retried
	}
	if p != nil {
		first, _, _ := strings.Cut(fmt.Sprint(p.value), "\n")
		msg = "Desired panicked: " + first
	}
	cond, blocker := readyCondition(parent, readyState{status: metav1.ConditionFalse, reason: DesiredFailedReason, message: truncate(msg, 32000)})
	framework.NoteBlocked(ctx, blocker)
	d.reportInvalid(parent, cond, "Desired")
	werr := d.setReadyCondition(ctx, parent, cond)
	if p != nil {
		if werr != nil {
			logr.FromContextOrDiscard(ctx).Error(errtext.Error(werr), "cannot write the Ready condition of a parent whose Desired panicked")
		}
		panic(fmt.Errorf("declarative: Desired of %s %s panicked: %v\n%s", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), p.value, p.stack))
	}
	if werr != nil {
		return errors.Join(err, werr)
	}
	return err
}
