package declarative

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
)

// finalizerManager owns the finalizer entry, apart from the fields the
// reconciler applies, so adding it touches nothing else.
func (d *Declarative[T]) finalizerManager() string { return d.opts.FieldManager + "-finalizer" }

// errParentGone reports that the parent was deleted (or replaced by another
// of the same name) since the cache showed it.
var errParentGone = errors.New("parent is gone")

// addFinalizer adds converge's finalizer with a server-side apply by its own
// field manager.
//
// The apply names the parent's UID: an apply creates missing objects, and
// without the UID a parent deleted meanwhile would be re-created, empty. With
// it the server answers with a conflict instead, which means "gone": then it
// returns an error wrapping errParentGone. In a sharded reconcile the apply
// is also conditional on the parent's resourceVersion as read
// (client.WithPreconditions), and a conflict may mean "changed": the
// parent is then read from the API server to tell.
func (d *Declarative[T]) addFinalizer(ctx context.Context, parent T) error {
	u := d.objectRef(parent)
	u.SetUID(parent.GetUID())
	u.SetFinalizers([]string{d.opts.Finalizer})
	_, err := d.client.Apply(ctx, u, client.FieldManager(d.finalizerManager()), client.ForceOwnership())
	if apierrors.IsConflict(err) {
		if gone, gerr := d.parentGone(ctx, parent); gerr != nil || !gone {
			return fmt.Errorf("add finalizer %s: %w", d.opts.Finalizer, errors.Join(err, gerr))
		}
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("add finalizer %s: %w: %w", d.opts.Finalizer, errParentGone, err)
	}
	return err
}

// removeFinalizer removes every copy of converge's finalizer from parent,
// whoever added it: an apply by converge's field manager would only remove
// an entry it owns, and one restored from a backup or copied from YAML is
// owned by whoever wrote it. A JSON patch tests the parent's UID and each
// entry's position first, so it removes nothing else; when parent's list is
// stale the test fails and the reconcile is retried with a fresh parent.
func (d *Declarative[T]) removeFinalizer(ctx context.Context, parent object.Object) error {
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": string(parent.GetUID())}}
	fins := parent.GetFinalizers()
	for i := len(fins) - 1; i >= 0; i-- { // from the end, so indexes stay valid
		if fins[i] == d.opts.Finalizer {
			path := fmt.Sprintf("/metadata/finalizers/%d", i)
			ops = append(ops, map[string]any{"op": "test", "path": path, "value": fins[i]}, map[string]any{"op": "remove", "path": path})
		}
	}
	if len(ops) == 1 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = d.client.Patch(ctx, d.objectRef(parent), types.JSONPatchType, patch, client.FieldManager(d.finalizerManager()))
	if apierrors.IsNotFound(err) {
		return nil // gone already
	}
	if err != nil {
		return fmt.Errorf("remove finalizer %s: %w", d.opts.Finalizer, err)
	}
	return nil
}

// finalizeParent runs cleanup for a parent being deleted: in its own
// cluster and in every other its ledger names (see Child.InCluster). A
// cluster that cannot be used now holds the deletion until it can.
func (d *Declarative[T]) finalizeParent(ctx context.Context, parent T) error {
	if !slices.Contains(parent.GetFinalizers(), d.opts.Finalizer) {
		return nil // not ours to hold: owner references let the garbage collector finish
	}
	if d.finalize != nil {
		if err := d.finalize.Finalize(ctx, parent); err != nil {
			return fmt.Errorf("finalize %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
		}
	}
	var errs []error
	wait := ""
	for _, cl := range append([]string{""}, d.ledgerClusters(parent)...) {
		at, away, err := d.siteOf(cl, parent)
		if err == nil && away != "" {
			wait = cmp.Or(wait, "deletion waits for "+away+d.goneHint(cl))
			continue
		}
		if err == nil {
			var w string
			w, err = d.finalizeIn(ctx, at, parent)
			wait = cmp.Or(wait, w)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if wait != "" {
		// The parent is not converged until it is gone: say what its
		// deletion waits for.
		return d.noteDeletionWait(ctx, parent, wait)
	}
	return d.removeFinalizer(ctx, parent)
}

// finalizeIn deletes, or releases, the children of parent in the cluster
// at, and says what the deletion waits for there, if anything.
func (d *Declarative[T]) finalizeIn(ctx context.Context, at *site, parent T) (string, error) {
	var errs []error
	kinds := d.sortedKinds()
	found := make([][]object.Object, len(kinds))
	for i, ck := range kinds {
		// From the API server: the cache may not show yet a child this
		// process applied a moment ago, and once the finalizer is gone a
		// child missed now would never be deleted.
		objs, err := d.liveChildren(ctx, at, ck, parent)
		if err != nil {
			errs = append(errs, err)
		}
		found[i] = objs
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	// A child another one is After is deleted once that one is gone: its
	// deletion reconciles the parent again.
	held := dependedOn(slices.Concat(found...))
	deleted := map[string]bool{}
	for i, ck := range kinds {
		for _, obj := range found[i] {
			if retained(obj) {
				// Released, not deleted, before the parent is gone: the
				// garbage collector never takes it (see Child.Retain).
				if err := d.release(ctx, at, ck, parent, obj); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			id := objectIn(ck.gvk.GroupKind(), at.name, obj.GetNamespace(), obj.GetName())
			if held[id] {
				continue
			}
			if err := d.deleteChild(ctx, at, ck, obj); err != nil {
				errs = append(errs, err)
			}
			deleted[id] = true
		}
	}
	if err := errors.Join(errs...); err != nil || len(held) == 0 {
		return "", err
	}
	return deletionWait(parent, at.name, kinds, found, held, deleted), nil
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
		dropNulls(m)
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
	applied, err := d.client.Status().Apply(ctx, u, client.FieldManager(d.opts.FieldManager), client.ForceOwnership())
	if apierrors.IsNotFound(err) {
		// The parent is gone, or its kind has no status subresource: the
		// API server answers both with NotFound.
		gone, gerr := d.parentGone(ctx, parent)
		switch {
		case gerr != nil:
			return fmt.Errorf("apply status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), errors.Join(err, gerr))
		case !gone:
			return fmt.Errorf("apply status of %s %s: the parent exists, so its kind has no status subresource (a CRD needs subresources: status: {}); leave State.Status nil for it: %w",
				d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
		}
		return nil // a new parent of the same name is reconciled on its own
	}
	if apierrors.IsConflict(err) {
		// The parent is gone (a new one of the same name is reconciled on
		// its own), or, in a sharded reconcile, whose writes are
		// conditional on the parent as read, it changed: then the status
		// is applied again with the parent as it is now.
		if gone, gerr := d.parentGone(ctx, parent); gerr != nil || !gone {
			return fmt.Errorf("apply status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), errors.Join(err, gerr))
		}
		return nil
	}
	if err != nil {
		return err
	}
	d.statuses.set(parent.GetUID(), appliedStatus{hash: h, resourceVersion: applied.GetResourceVersion()})
	return nil
}

// parentGone reports whether parent no longer exists on the API server (read
// live, not from the cache): no object of its name, or one with another UID.
func (d *Declarative[T]) parentGone(ctx context.Context, parent T) (bool, error) {
	m, err := d.mgr.RESTMapper().RESTMapping(d.parentGVK.GroupKind(), d.parentGVK.Version)
	if err != nil {
		return false, fmt.Errorf("read %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	}
	var res metadata.ResourceInterface = d.live.Resource(m.Resource)
	if parent.GetNamespace() != "" {
		res = d.live.Resource(m.Resource).Namespace(parent.GetNamespace())
	}
	obj, err := res.Get(ctx, parent.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
	}
	return obj.GetUID() != parent.GetUID(), nil
}

// goneHint says, of cluster name that a deletion waits for, what to do if
// it is gone for good, when it is not engaged: no provider can tell that
// it will never name the cluster again (a kubeconfig Secret rotated, a
// provider that has not listed yet, a cluster another member of a
// sharding ring holds all look the same), so converge waits, and only
// its operator can decide to stop waiting.
func (d *Declarative[T]) goneHint(name string) string {
	if _, err := d.mgr.Clusters().Get(name); err == nil {
		return "" // engaged, but unhealthy: it comes back by itself
	}
	return fmt.Sprintf("; if it is gone for good, remove finalizer %s from this %s by hand (its children there, if any are left, are then yours to delete)", d.opts.Finalizer, d.parentGVK.Kind)
}
