package staledelete

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// Fixed confirms with the API server that the DB is gone before the
// destructive write, and deletes only the backup it read (its UID).
func Fixed(mgr *framework.Manager) error {
	c := mgr.Client()
	return builder(mgr).Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
		key, ok := dbOf(cm)
		if !ok {
			return reconcile.Result{}, nil
		}
		err := c.Get(ctx, key, &api.DB{})
		if apierrors.IsNotFound(err) {
			err = mgr.APIReader().Get(ctx, key, &api.DB{}) // the cache may lag: ask the server
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.Delete(ctx, cm, client.MatchingUID(cm.UID))
		}
		return reconcile.Result{}, err
	}))
}
