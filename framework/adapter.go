package framework

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// objectAdapter turns an ObjectReconciler into a Reconciler: it reads the
// object from the cache and hands it over, or hands a tombstone to the
// optional DeletionReconciler when the object is gone.
type objectAdapter[T informers.Object] struct {
	reader  *typedReader[T]
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
	obj, err := a.reader.Get(ctx, req.Namespace, req.Name)
	switch {
	case err == nil:
		if a.deleted != nil {
			// Re-created since a deletion: the old tombstone is moot.
			a.mu.Lock()
			delete(a.tombstones, req)
			a.mu.Unlock()
		}
		return a.r.Reconcile(ctx, obj)
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	case a.deleted == nil:
		return reconcile.Result{}, nil
	}
	a.mu.Lock()
	last, ok := a.tombstones[req]
	a.mu.Unlock()
	if !ok {
		// Deleted before this process saw it, or its deletion was already
		// reconciled: nothing to report.
		return reconcile.Result{}, nil
	}
	res, err := a.deleted.ReconcileDeleted(ctx, reconcile.Tombstone[T]{Request: req, Last: last})
	if err == nil || reconcile.IsTerminal(err) {
		a.mu.Lock()
		if cur, still := a.tombstones[req]; still && any(cur) == any(last) {
			delete(a.tombstones, req)
		}
		a.mu.Unlock()
	}
	return res, err
}
