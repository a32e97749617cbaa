package tlscreate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Buggy sets up the controller as the operator wrote it: the external
// certificate's existence stands for both.
func Buggy(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Owns(&corev1.Secret{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			var s corev1.Secret
			err := c.Get(ctx, types.NamespacedName{Namespace: db.Namespace, Name: db.Name + "-ssl"}, &s)
			if err == nil {
				return reconcile.Result{}, nil // "TLS already set up"
			}
			if !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
			}
			if err := c.Create(ctx, newCert(db, db.Name+"-ssl")); err != nil {
				return reconcile.Result{}, err
			}
			// Lost if the process dies here.
			return reconcile.Result{}, c.Create(ctx, newCert(db, db.Name+"-ssl-internal"))
		}))
}
