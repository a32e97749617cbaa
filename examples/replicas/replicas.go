// Package replicas is the controller of the README's "Migrating a
// controller-runtime controller", converted: it keeps a ConfigMap holding
// each Deployment's ready replicas. A test keeps the code between the
// README markers identical to the README's block, and runs the controller
// on framework/fake.
package replicas

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/reconcile"
)

// README begin
type Reconciler struct {
	client *client.Client
	scheme *runtime.Scheme
}

// Reconcile is handed the Deployment from the cache (read-only); a deleted
// one's key is dropped, and its ConfigMap goes with it (owner reference).
func (r *Reconciler) Reconcile(ctx context.Context, d *appsv1.Deployment) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-replicas"}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.client, cm, func() error {
		cm.Data = map[string]string{"ready": strconv.Itoa(int(d.Status.ReadyReplicas))}
		return controllerutil.SetControllerReference(d, cm, r.scheme)
	})
	return reconcile.Result{}, err
}

func SetupWithManager(mgr *framework.Manager) error {
	r := &Reconciler{client: mgr.Client(), scheme: mgr.Scheme()}
	return framework.NewBuilder[*appsv1.Deployment](mgr, "replicas", framework.ControllerOptions{}).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}

// README end
