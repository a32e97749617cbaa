package declarative

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/reconcile"
)

// declarationError is an error in what Desired declared (a child of a kind
// not in Options.ChildKinds, outside the cache's selection, declared twice,
// children whose order cannot be followed...): converge cannot apply the
// State as declared, and trying again changes nothing until the parent,
// or what Desired reads, changes.
type declarationError struct{ err error }

func (e *declarationError) Error() string { return e.err.Error() }
func (e *declarationError) Unwrap() error { return e.err }

// invalidDeclaration marks err as an error of the declaration.
func invalidDeclaration(err error) error { return &declarationError{err: err} }

// declarationErrors returns the errors of the declaration among err (one
// error, or several joined), joined; nil when there is none.
func declarationErrors(err error) error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if d, ok := err.(*declarationError); ok {
			out = append(out, d.err)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return errors.Join(out...)
}

// invalid finishes a reconcile whose State cannot be applied as declared
// (err says why): nothing is applied or pruned; the Ready condition (when
// State.Status has conditions) and the reconcile's Blocker report err, a
// Warning Event of reason ChildGraphReason does too when it is new (see
// reportInvalid), and the reconcile fails with it, terminally: the parent,
// or what Desired reads, must change first.
func (d *Declarative[T]) invalid(ctx context.Context, parent T, state State, err error) (reconcile.Result, error) {
	err = fmt.Errorf("%s %s: children: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	cond, blocker := readyCondition(parent, readyState{status: metav1.ConditionFalse, reason: ChildGraphReason, message: truncate(errtext.Of(err), 32000)})
	framework.NoteBlocked(ctx, blocker)
	d.reportInvalid(parent, cond, "Apply")
	if state.Status != nil {
		status, serr := withReadyCondition(state.Status, cond)
		if serr == nil {
			serr = d.applyStatus(ctx, parent, status)
		}
		if serr != nil {
			return reconcile.Result{}, errors.Join(reconcile.Terminal(err), serr)
		}
	}
	return reconcile.Result{}, reconcile.Terminal(err)
}

// reportInvalid records a Warning Event of cond's reason and message, and
// of action, on parent, unless it was reported already: the parent's
// Ready condition already says exactly that (so a restart, or the
// reconcile that the status write itself brings about, records nothing),
// or this process recorded that message for the parent last. One Event
// per change of the error, then; a parent whose status has no conditions
// gets one per process.
func (d *Declarative[T]) reportInvalid(parent T, cond metav1.Condition, action string) {
	for _, c := range parentConditions(parent) {
		if c.Type == ReadyCondition && c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			d.invalids.set(parent.GetUID(), cond.Message)
			return
		}
	}
	if !d.invalids.set(parent.GetUID(), cond.Message) {
		return
	}
	d.recorder.Eventf(parent, nil, corev1.EventTypeWarning, cond.Reason, action, "%s", truncate(cond.Message, 1024))
}

// reportedErrors remembers, per parent, the message last reported with an
// Event (a declaration error, the Jobs that rerun). It is safe for
// concurrent use.
type reportedErrors struct {
	mu sync.Mutex
	// byUID holds the message of each parent's last reported error; mu
	// guards it.
	byUID map[types.UID]string
}

// set records msg for uid and reports whether it is new.
func (r *reportedErrors) set(uid types.UID, msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byUID == nil {
		r.byUID = map[types.UID]string{}
	}
	if old, ok := r.byUID[uid]; ok && old == msg {
		return false
	}
	r.byUID[uid] = msg
	return true
}

// forget drops uid: its declaration is valid, or it is gone.
func (r *reportedErrors) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byUID, uid)
}
