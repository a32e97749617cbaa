package finalizer

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed cleans up first, and removes its finalizer in its last write.
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			if db.DeletionTimestamp != nil {
				if !slices.Contains(db.Finalizers, name) {
					return reconcile.Result{}, nil
				}
				if err := c.Delete(ctx, record(db)); err != nil && !apierrors.IsNotFound(err) {
					return reconcile.Result{}, err
				}
				db = db.DeepCopy()
				db.Finalizers = slices.DeleteFunc(db.Finalizers, func(f string) bool { return f == name })
				return reconcile.Result{}, c.Update(ctx, db)
			}
			return ensure(ctx, mgr, db)
		}))
}
