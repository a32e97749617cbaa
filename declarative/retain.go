package declarative

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
)

// retained reports whether obj, a child, is to be released rather than
// deleted (see Child.Retain).
func retained(obj metav1.Object) bool { return obj.GetAnnotations()[RetainAnnotation] == "true" }

// convergeLabels and convergeAnnotations are what converge puts on a child,
// and release removes.
var (
	convergeLabels      = []string{ParentUIDLabel, ManagerLabel}
	convergeAnnotations = []string{ParentAnnotation, AppliedAnnotation, ClaimAnnotation, AfterAnnotation, RetainAnnotation, RunOnceAnnotation}
)

// release makes obj, a retained child of parent being pruned or finalized,
// nobody's: a JSON merge patch removes the labels and annotations converge
// put on it and any owner reference to parent, on condition that obj is
// unchanged since it was read (its resourceVersion), so that nothing of
// what someone added meanwhile is lost: the next reconcile tries again.
// An object gone is not an error.
func (d *Declarative[T]) release(ctx context.Context, at *site, ck *childKind, parent, obj object.Object) error {
	md := map[string]any{"resourceVersion": obj.GetResourceVersion()}
	labels := map[string]any{}
	for _, k := range convergeLabels {
		if _, ok := obj.GetLabels()[k]; ok {
			labels[k] = nil
		}
	}
	annotations := map[string]any{}
	for _, k := range convergeAnnotations {
		if _, ok := obj.GetAnnotations()[k]; ok {
			annotations[k] = nil
		}
	}
	md["labels"], md["annotations"] = labels, annotations
	refs := obj.GetOwnerReferences()
	kept := make([]metav1.OwnerReference, 0, len(refs))
	for _, r := range refs {
		if r.UID != parent.GetUID() {
			kept = append(kept, r)
		}
	}
	if len(kept) < len(refs) {
		md["ownerReferences"] = kept
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ck.gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	what := ck.gvk.Kind + " " + key(obj.GetNamespace(), obj.GetName())
	err = at.client.Patch(ctx, u, types.MergePatchType, patch, client.FieldManager(d.opts.FieldManager+"-release"))
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("release retained child %s of %s %s: %w", what, d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	}
	logr.FromContextOrDiscard(ctx).Info("released retained child: it stays, and is nobody's", "child", what)
	return nil
}
