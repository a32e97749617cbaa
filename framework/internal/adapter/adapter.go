// Package adapter turns a reconcile.ObjectReconciler into the
// reconcile.Reconciler a controller's workers call: for each key it reads
// the object from the cache of the key's cluster and hands it over; for a
// reconciler that is also a reconcile.DeletionReconciler it keeps the
// last state of each deleted object (its tombstone) and hands it to
// ReconcileDeleted until that succeeds. The framework hands in the
// readers; the adapter knows nothing of sources, queues or clusters'
// engagement.
package adapter

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// Adapter is an ObjectReconciler as a Reconciler.
type Adapter[T object.Object] struct {
	// reader returns the reader of the named cluster's objects ("" for
	// the manager's own), nil when the controller does not watch that
	// cluster (any more).
	reader  func(cluster string) informers.Reader[T]
	r       reconcile.ObjectReconciler[T]
	deleted reconcile.DeletionReconciler[T] // nil: deletions are dropped

	mu sync.Mutex
	// tombstones holds the last state of deleted objects until their
	// deletion is reconciled; mu guards it.
	tombstones map[reconcile.Request]T
}

var _ reconcile.Reconciler = (*Adapter[object.Object])(nil)

// New returns the Reconciler of r, which reads a key's object with the
// reader returns for the key's cluster.
func New[T object.Object](r reconcile.ObjectReconciler[T], reader func(cluster string) informers.Reader[T]) *Adapter[T] {
	a := &Adapter[T]{reader: reader, r: r}
	if d, ok := r.(reconcile.DeletionReconciler[T]); ok {
		a.deleted, a.tombstones = d, map[reconcile.Request]T{}
	}
	return a
}

// Remember returns the function that keeps the last state of a deleted
// object of the named cluster for ReconcileDeleted; nil when the
// reconciler is no DeletionReconciler.
func (a *Adapter[T]) Remember(cluster string) func(T) {
	if a.deleted == nil {
		return nil
	}
	return func(obj T) {
		req := reconcile.Request{Cluster: cluster, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		a.mu.Lock()
		a.tombstones[req] = obj
		a.mu.Unlock()
	}
}

// Reconcile reads req's object and reconciles it, after the deletion of
// the object last seen under its name when that one is gone.
func (a *Adapter[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reader := a.reader(req.Cluster)
	if reader == nil {
		return reconcile.Result{}, nil // disengaged meanwhile: its keys are dropped
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
func (a *Adapter[T]) forget(req reconcile.Request, last T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.tombstones[req]; ok && cur.GetUID() == last.GetUID() && cur.GetResourceVersion() == last.GetResourceVersion() {
		delete(a.tombstones, req)
	}
}
