package framework

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// objectAdapter turns an ObjectReconciler into a Reconciler: it reads the
// object from the cache and hands it over, or hands a tombstone to the
// optional DeletionReconciler when the object is gone.
type objectAdapter[T object.Object] struct {
	reader  informers.Reader[T]
	r       reconcile.ObjectReconciler[T]
	deleted reconcile.DeletionReconciler[T] // nil: deletions are dropped

	mu sync.Mutex
	// tombstones holds the last state of deleted objects until their
	// deletion is reconciled; mu guards it.
	tombstones map[reconcile.Request]T
}

// remember keeps the last state of a deleted object for ReconcileDeleted.
func (a *objectAdapter[T]) remember(obj T) {
	a.mu.Lock()
	a.tombstones[requestFor(obj)] = obj
	a.mu.Unlock()
}

func (a *objectAdapter[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, err := a.reader.Get(ctx, types.NamespacedName(req))
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if a.deleted != nil {
		a.mu.Lock()
		last, ok := a.tombstones[req]
		a.mu.Unlock()
		switch {
		case ok && (!found || last.GetUID() != obj.GetUID()):
			// The object we knew is gone, perhaps already replaced by a new
			// one of the same name: report its deletion first.
			res, err := a.deleted.ReconcileDeleted(ctx, reconcile.Tombstone[T]{Request: req, Last: last})
			done := (err == nil && res.RequeueAfter <= 0) || reconcile.IsTerminal(err)
			if done {
				a.forget(req, last)
			}
			if !done || !found {
				return res, err
			}
		case ok:
			a.forget(req, last) // the same object is back in the cache: nothing was deleted
		}
	}
	if !found {
		// Deleted before this process saw it, or its deletion was already
		// reconciled: nothing to do.
		return reconcile.Result{}, nil
	}
	return a.r.Reconcile(ctx, obj)
}

// forget drops the tombstone of req if it is still last.
func (a *objectAdapter[T]) forget(req reconcile.Request, last T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.tombstones[req]; ok && cur.GetUID() == last.GetUID() && cur.GetResourceVersion() == last.GetResourceVersion() {
		delete(a.tombstones, req)
	}
}
