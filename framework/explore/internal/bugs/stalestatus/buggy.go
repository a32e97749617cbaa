package stalestatus

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Buggy wakes for its StatefulSet only when the StatefulSet's generation
// changes, so a status read from a stale StatefulSet is never corrected.
func Buggy(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Watches(framework.Owned(&appsv1.StatefulSet{}, framework.GenerationChanged[*appsv1.StatefulSet])).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			return reconcile.Result{}, reconcileDB(ctx, c, db)
		}))
}
