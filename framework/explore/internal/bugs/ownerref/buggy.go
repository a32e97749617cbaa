package ownerref

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Buggy creates the child, then makes the DB its controller in a second
// write; a child that exists is taken as done.
func Buggy(mgr *framework.Manager) error {
	c := mgr.Client()
	return framework.NewBuilder[*api.DB](mgr, "db", framework.ControllerOptions{}).
		Owns(&corev1.Secret{}).
		Complete(reconcile.ObjectFunc[*api.DB](func(ctx context.Context, db *api.DB) (reconcile.Result, error) {
			if db.DeletionTimestamp != nil {
				return reconcile.Result{}, nil
			}
			child := newConfig(db)
			err := c.Get(ctx, types.NamespacedName{Namespace: child.Namespace, Name: child.Name}, &corev1.Secret{})
			if err == nil || !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
			}
			if err := c.Create(ctx, child); err != nil {
				return reconcile.Result{}, err
			}
			// A crash here leaves the child without an owner.
			child.OwnerReferences = []metav1.OwnerReference{api.ControllerRef(db)}
			return reconcile.Result{}, c.Update(ctx, child)
		}))
}
