package declarative

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
)

// finalizerManager owns the finalizer entry, apart from the fields the
// reconciler applies, so adding and removing it touches nothing else.
func (d *Declarative[T]) finalizerManager() string { return d.opts.FieldManager + "-finalizer" }

// setFinalizer adds (on) or removes (off) converge's finalizer with a
// server-side apply by its own field manager.
//
// The apply names the parent's UID: an apply creates missing objects, and
// without the UID a parent deleted meanwhile would be re-created, empty. With
// it the server answers with a conflict instead, which means "gone".
func (d *Declarative[T]) setFinalizer(ctx context.Context, parent informers.Object, on bool) error {
	u := d.objectRef(parent)
	u.SetUID(parent.GetUID())
	if on {
		u.SetFinalizers([]string{d.opts.Finalizer})
	}
	_, err := d.client.Apply(ctx, u, framework.FieldManager(d.finalizerManager()), framework.ForceOwnership())
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the parent is gone; a new one of the same name is reconciled on its own
	}
	return err
}

// finalizeParent runs cleanup for a parent being deleted.
func (d *Declarative[T]) finalizeParent(ctx context.Context, parent T) error {
	if !hasString(parent.GetFinalizers(), d.opts.Finalizer) {
		return nil // not ours to hold: owner references let the garbage collector finish
	}
	if d.finalize != nil {
		if err := d.finalize.Finalize(ctx, parent); err != nil {
			return fmt.Errorf("finalize %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
		}
	}
	var errs []error
	for _, ck := range d.sortedKinds() {
		found, err := d.labelled(ctx, ck, parent)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, obj := range found {
			if err := d.deleteChild(ctx, ck, obj); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return d.setFinalizer(ctx, parent, false)
}

// applyStatus applies status to the parent's status subresource, unless the
// parent already holds exactly that status (see statusHeld).
func (d *Declarative[T]) applyStatus(ctx context.Context, parent T, status any) error {
	b, err := json.Marshal(status)
	if err != nil {
		return fmt.Errorf("encode status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		return err
	}
	if m, ok := want.(map[string]any); ok {
		prune(m)
	}
	h, err := hashOf(map[string]any{"status": want})
	if err != nil {
		return fmt.Errorf("hash status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	}
	if d.statusHeld(parent, want, h) {
		return nil // nothing would change
	}
	u := d.objectRef(parent)
	// The UID makes the apply fail with a conflict, not write a parent of
	// the same name that replaced this one.
	u.SetUID(parent.GetUID())
	u.Object["status"] = want
	applied, err := d.client.Status().Apply(ctx, u, framework.FieldManager(d.opts.FieldManager), framework.ForceOwnership())
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the parent is gone; a new one of the same name is reconciled on its own
	}
	if err != nil {
		return err
	}
	d.statuses.set(parent.GetUID(), appliedStatus{hash: h, resourceVersion: applied.GetResourceVersion()})
	return nil
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: map[string]any{"m": m}}).DeepCopy().Object["m"].(map[string]any)
}
