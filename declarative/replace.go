package declarative

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/object"
)

// errReplacing is returned by applyChild for a child declared with
// Child.ReplaceWhenImmutable whose object it deleted, or found being
// deleted, to create it again: not a failure. The deletion changes the
// object, which reconciles the parent again.
var errReplacing = errors.New("the object is being replaced")

// immutable reports whether err is the API server's refusal of a write that
// changes a field that cannot change: 422 Invalid, with a cause saying that
// the field is immutable (the message of apimachinery's
// ValidateImmutableField, and of most custom validations of the kind).
func immutable(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if strings.Contains(strings.ToLower(c.Message), "immutable") {
				return true
			}
		}
	}
	return strings.Contains(strings.ToLower(st.Message), "immutable")
}

// replace deletes live, c's object, which the API server refused to apply
// c over because c changes an immutable field, for a later reconcile to
// create it again once it is gone: with foreground propagation (what it
// owns goes first: a Job's pods stop before the new Job starts others), on
// condition that it still is live (its UID). It returns errReplacing, or
// the error of the deletion.
func (d *Declarative[T]) replace(ctx context.Context, c child, live metav1.Object, refusal error) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(c.kind.gvk)
	u.SetNamespace(live.GetNamespace())
	u.SetName(live.GetName())
	err := c.at.client.Delete(ctx, u, client.MatchingUID(live.GetUID()), client.Propagation(metav1.DeletePropagationForeground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("replace %s, whose apply was refused (%s): delete: %w", c, applyCause(refusal), err)
	}
	logr.FromContextOrDiscard(ctx).Info("replacing child: the API server refused to change a field that cannot change", "child", c.String(), "cause", applyCause(refusal))
	return errReplacing
}

// replacing reports whether c, declared with Child.ReplaceWhenImmutable, is
// being replaced: live, its object, which parent owns, is being deleted. It
// is created again once it is gone.
func replacing(c child, live object.Object) bool {
	return c.policy.replace && live.GetDeletionTimestamp() != nil
}

// applyCause says, for the parent's Ready condition, why an apply failed:
// the conflict's note, or the API server's cause (its reason and the
// fields it refused, without the values it quotes, which may be a whole
// pod template: see errtext.Cause), or the error (see errtext.Of).
func applyCause(err error) string {
	var conflict *conflictError
	if errors.As(err, &conflict) {
		return conflict.shown
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return truncate(errtext.Of(err), 1024)
	}
	st := status.Status()
	var causes []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			causes = append(causes, errtext.Cause(c))
		}
	}
	what := fmt.Sprintf("the API server answered %d %s", st.Code, st.Reason)
	if len(causes) == 0 {
		return truncate(what+": "+st.Message, 1024)
	}
	return truncate(what+": "+strings.Join(causes, "; "), 1024)
}
