package ownerref

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed sets the controller reference before the child is created, so
// the child never exists without it.
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Owns(&corev1.Secret{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			if db.DeletionTimestamp != nil {
				return reconcile.Result{}, nil
			}
			child := newConfig(db)
			child.OwnerReferences = []metav1.OwnerReference{api.ControllerRef(db)}
			if err := c.Create(ctx, child); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}))
}
