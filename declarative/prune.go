package declarative

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// prune deletes the children parent owns (see owns) that are not desired,
// and drops the label-linked ones it deleted from the parent's ledger. A
// labelled object that parent does not provably own is left alone. held
// says, of each child left for a later reconcile because another child is
// After it, why ("ConfigMap config is deleted once Job migrate, which is
// After it, is gone").
func (d *Declarative[T]) prune(ctx context.Context, parent object.Object, desired []child) (held []string, err error) {
	keep := make(map[string]bool, len(desired))
	for _, c := range desired {
		keep[c.id()] = true
	}
	var errs []error
	deleted := map[string]string{}        // ledger entries to drop
	holder := d.heldChildren(ctx, parent) // see Child.After
	var holds []pruneHold
	for _, cl := range append([]string{""}, d.ledgerClusters(parent)...) {
		at, away, err := d.siteOf(cl, parent)
		switch {
		case err != nil:
			errs = append(errs, err)
		case away != "":
			// Nothing is pruned there until it is back: say what waits.
			for id := range d.ledger.recorded(parent) {
				if id = strings.TrimPrefix(id, "?"); clusterOf(id) == cl && !keep[id] && !slices.ContainsFunc(holds, func(h pruneHold) bool { return h.child == displayID(parent, id) }) {
					holds = append(holds, pruneHold{child: displayID(parent, id), by: away, away: true})
				}
			}
		default:
			h, err := d.pruneIn(ctx, at, parent, keep, holder, deleted)
			holds, errs = append(holds, h...), append(errs, err)
		}
	}
	if len(deleted) > 0 {
		errs = append(errs, d.record(ctx, parent, deleted))
	}
	// First the children held by one that is not held itself: what the
	// prune waits for now.
	slices.SortStableFunc(holds, func(a, b pruneHold) int {
		aHeld := slices.ContainsFunc(holds, func(h pruneHold) bool { return h.child == a.by })
		bHeld := slices.ContainsFunc(holds, func(h pruneHold) bool { return h.child == b.by })
		switch {
		case aHeld == bHeld:
			return 0
		case bHeld:
			return -1
		}
		return 1
	})
	for _, h := range holds {
		if h.away {
			held = append(held, fmt.Sprintf("%s is deleted once %s is ready", h.child, h.by))
			continue
		}
		held = append(held, fmt.Sprintf("%s is deleted once %s, which is After it, is gone", h.child, h.by))
	}
	return held, errors.Join(errs...)
}

// pruneIn is prune in the cluster at: it deletes, or releases, the
// children parent owns there that keep does not hold, and adds the ledger
// entries to drop to deleted. It returns the children left for later
// because another is After them.
func (d *Declarative[T]) pruneIn(ctx context.Context, at *site, parent object.Object, keep map[string]bool, holder func(*site, *childKind, object.Object) (string, error), deleted map[string]string) ([]pruneHold, error) {
	var errs []error
	var holds []pruneHold
	for _, ck := range d.sortedKinds() {
		found, err := d.labelledIn(ctx, at, ck, parent)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, obj := range found {
			id := objectIn(ck.gvk.GroupKind(), at.name, obj.GetNamespace(), obj.GetName())
			if keep[id] || !d.ownsIn(at.name, parent, obj) {
				continue
			}
			if retained(obj) {
				// Released, not deleted: whatever is After it may stay.
				if err := d.release(ctx, at, ck, parent, obj); err != nil {
					errs = append(errs, err)
					continue
				}
				d.appliedChildren.drop(parent.GetUID(), obj.GetUID())
				deleted[id], deleted[claimKey(id)] = "", ""
				continue
			}
			if by, err := holder(at, ck, obj); by != "" || err != nil {
				if by != "" {
					holds = append(holds, pruneHold{child: displayID(parent, id), by: by})
					logr.FromContextOrDiscard(ctx).V(1).Info("child left for a later prune", "child", displayID(parent, id), "after", by)
				}
				errs = append(errs, err)
				continue
			}
			if err := d.deleteChild(ctx, at, ck, obj); err != nil {
				errs = append(errs, err)
				continue
			}
			d.appliedChildren.drop(parent.GetUID(), obj.GetUID())
			if labelLinked(parent, obj, at.name) {
				deleted[id], deleted[claimKey(id)] = "", ""
			}
		}
	}
	return holds, errors.Join(errs...)
}

// pruneHold is a child left for a later prune, and the child After it
// that is still there, or, when away, the cluster it waits for.
type pruneHold struct {
	child, by string
	away      bool
}

// labelled returns the cached children of kind ck that carry parent's labels.
// It reads the kind's index by ParentUIDLabel (see indexByParent), so its cost
// is that of parent's children, not of every cached object of the kind.
//
// A kind read per bucket by namespace is listed in the parent's namespace
// only, where its children are (see prepare): should the parent's bucket
// no longer be held here, the list fails rather than finding no children.
func (d *Declarative[T]) labelled(ctx context.Context, ck *childKind, parent object.Object) ([]object.Object, error) {
	return d.labelledIn(ctx, d.local, ck, parent)
}

// labelledIn is labelled in the cluster at.
func (d *Declarative[T]) labelledIn(ctx context.Context, at *site, ck *childKind, parent object.Object) ([]object.Object, error) {
	if !at.remote() && !ck.isServed() {
		return nil, nil // a kind not served has no objects (see served.go)
	}
	r, err := at.reader(ck)
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{ManagerLabel: labelValue(d.opts.FieldManager)})
	opts := []informers.ListOption{informers.MatchingIndex(ParentUIDLabel, string(parent.GetUID())), informers.MatchingLabels(sel)}
	if !at.remote() && ck.perNamespace(parent) {
		opts = append(opts, informers.InNamespace(parent.GetNamespace()))
	}
	objs, err := r.List(ctx, opts...)
	if err != nil {
		if at.remote() {
			return nil, fmt.Errorf("list %s children in cluster %s: %w", ck.gvk.Kind, at.name, err)
		}
		return nil, fmt.Errorf("list %s children: %w", ck.gvk.Kind, err)
	}
	return objs, nil
}

// deleteChild deletes obj, a child of kind ck, on condition that it is
// still the object read (its UID) and, in a sharded reconcile, unchanged
// since (client.WithPreconditions). A conflict is not an error: the object
// was replaced (not this parent's to delete), or it changed, and its
// change reconciles the parent again.
func (d *Declarative[T]) deleteChild(ctx context.Context, at *site, ck *childKind, obj object.Object) error {
	client.NoteRead(ctx, ck.gvk.GroupKind(), obj)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ck.gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	err := at.client.Delete(ctx, u, client.MatchingUID(obj.GetUID()), client.Propagation(metav1.DeletePropagationBackground))
	switch {
	case err == nil:
		logr.FromContextOrDiscard(ctx).Info("deleted child", "child", ck.gvk.Kind+" "+key(obj.GetNamespace(), obj.GetName()), "cluster", at.name)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		return err
	}
	return nil
}
