package noretry

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Buggy logs the status update's error and reports success.
func Buggy(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		WithPredicates(framework.GenerationChanged[*api.DB]).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			if err := c.Status().Update(ctx, status(db)); err != nil {
				logr.FromContextOrDiscard(ctx).Error(err, "status update failed")
				return reconcile.Result{}, nil // on a 409 nothing brings this DB back
			}
			return reconcile.Result{}, nil
		}))
}
