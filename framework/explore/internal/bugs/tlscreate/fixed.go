package tlscreate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed sets up the controller with one idempotent create per object.
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Owns(&corev1.Secret{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			for _, name := range []string{db.Name + "-ssl", db.Name + "-ssl-internal"} {
				if err := c.Create(ctx, newCert(db, name)); err != nil && !apierrors.IsAlreadyExists(err) {
					return reconcile.Result{}, err
				}
			}
			return reconcile.Result{}, nil
		}))
}
