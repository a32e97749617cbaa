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
	reader informers.Reader[T] // the manager's own cluster's
	// remote returns the reader of another engaged cluster, nil when the
	// controller does not watch it (any more); nil for a controller of
	// the manager's own cluster only.
	remote  func(cluster string) informers.Reader[T]
	r       reconcile.ObjectReconciler[T]
	deleted reconcile.DeletionReconciler[T] // nil: deletions are dropped

	mu sync.Mutex
	// tombstones holds the last state of deleted objects until their
	// deletion is reconciled; mu guards it.
	tombstones map[reconcile.Request]T
}

// remember keeps the last state of a deleted object of the manager's own
// cluster for ReconcileDeleted.
func (a *objectAdapter[T]) remember(obj T) { a.rememberIn("")(obj) }

// rememberIn returns remember for the objects of the named cluster.
func (a *objectAdapter[T]) rememberIn(cluster string) func(T) {
	return func(obj T) {
		req := requestFor(obj)
		req.Cluster = cluster
		a.mu.Lock()
		a.tombstones[req] = obj
		a.mu.Unlock()
	}
}

func (a *objectAdapter[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reader := a.reader
	if req.Cluster != "" {
		if reader = a.remote(req.Cluster); reader == nil {
			return reconcile.Result{}, nil // disengaged meanwhile: its keys are dropped
		}
	}
	obj, err := reader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name})
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
