package controllerutil_test

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/controllerutil"
)

// A reconciler keeps a ConfigMap for each Deployment, controlled by it:
// created when missing, updated only when its data differs.
func ExampleCreateOrUpdate() {
	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		return
	}
	reconcileDeployment := func(ctx context.Context, d *appsv1.Deployment) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-settings"}}
		op, err := controllerutil.CreateOrUpdate(ctx, mgr.Client(), cm, func() error {
			cm.Data = map[string]string{"replicas": fmt.Sprint(*d.Spec.Replicas)}
			return controllerutil.SetControllerReference(d, cm, mgr.Scheme())
		})
		if err != nil {
			return err
		}
		fmt.Println("settings", op)
		return nil
	}
	_ = reconcileDeployment
}

// SetControllerReference refuses to take an object that another owner
// controls, with an error that names both. Owners that carry their
// apiVersion and kind need no scheme.
func ExampleSetControllerReference() {
	deployment := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}}
	fmt.Println(controllerutil.SetControllerReference(deployment("a"), cm, nil))
	fmt.Println(controllerutil.SetControllerReference(deployment("b"), cm, nil))
	// Output:
	// <nil>
	// object shop/settings is already controlled by Deployment a (uid uid-a)
}
