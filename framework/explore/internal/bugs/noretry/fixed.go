package noretry

import (
	"context"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed returns the error: the framework retries the DB with backoff.
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		WithPredicates(framework.GenerationChanged[*api.DB]).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			return reconcile.Result{}, c.Status().Update(ctx, status(db))
		}))
}
