package stalestatus

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed wakes for every change of its StatefulSet, status included: a
// status read from a stale StatefulSet is corrected when the cache
// catches up.
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Owns(&appsv1.StatefulSet{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			return reconcile.Result{}, reconcileDB(ctx, c, db)
		}))
}
