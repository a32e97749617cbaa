package finalizer

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Buggy removes its finalizer first, then cleans up.
func Buggy(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			if db.DeletionTimestamp != nil {
				if !slices.Contains(db.Finalizers, name) {
					return reconcile.Result{}, nil
				}
				db = db.DeepCopy()
				db.Finalizers = slices.DeleteFunc(db.Finalizers, func(f string) bool { return f == name })
				if err := c.Update(ctx, db); err != nil {
					return reconcile.Result{}, err
				}
				// A crash here leaks the record: the DB is gone.
				if err := c.Delete(ctx, record(db)); err != nil && !apierrors.IsNotFound(err) {
					return reconcile.Result{}, err
				}
				return reconcile.Result{}, nil
			}
			return ensure(ctx, mgr, db)
		}))
}

// ensure adds the finalizer, then creates the external record.
func ensure(ctx context.Context, mgr *framework.Manager, db *api.DB) (reconcile.Result, error) {
	c := mgr.Client()
	if !slices.Contains(db.Finalizers, name) {
		db = db.DeepCopy()
		db.Finalizers = append(db.Finalizers, name)
		if err := c.Update(ctx, db); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := c.Create(ctx, record(db)); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}
