package main

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// runApps registers the App controller as the root README's declarative
// section shows: Desired returns the two children and the status, and
// converge applies, watches and prunes them and writes the status.
func runApps(mgr *framework.Manager, opts framework.ControllerOptions) error {
	d, err := declarative.New(mgr, declarative.Func[*workload.App](desiredApp), declarative.Options{
		ChildKinds: []object.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}},
	})
	if err != nil {
		return err
	}
	return framework.NewBuilder[*workload.App](mgr, "bench", opts).Complete(d)
}

// desiredApp is what should exist for one App.
func desiredApp(_ context.Context, app *workload.App) (declarative.State, error) {
	labels := workload.AppLabels(app.Name)
	meta := metav1.ObjectMeta{Name: app.Name, Labels: labels}
	replicas := app.Spec.Replicas
	return declarative.State{
		Children: []any{
			&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{workload.AppDataKey: app.Spec.Data}},
			&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: workload.AppContainer, Image: app.Spec.Image,
					}}},
				},
			}},
		},
		Status: workload.AppStatus{
			ObservedGeneration: app.Generation,
			Conditions: declarative.NewConditions(app.Status.Conditions, app.Generation).
				True(workload.AppReady, "Applied", "every child is applied").List(),
		},
	}, nil
}
