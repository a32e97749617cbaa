// Package site is the StaticSite controller's logic: the children and status
// that should exist for one StaticSite. Command staticsite runs it; tests
// import it.
package site

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/object"
)

// Children returns an object of each kind Desired may declare, for
// declarative.Options.ChildKinds.
func Children() []object.Object {
	return []object.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
}

// Desired is the whole controller: what should exist for one StaticSite.
func Desired(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	labels := map[string]string{"app.kubernetes.io/name": "staticsite", "app.kubernetes.io/instance": site.Name}
	image := site.Spec.Image
	if image == "" {
		image = "nginx:1.27-alpine"
	}
	meta := metav1.ObjectMeta{Name: site.Name, Labels: labels}
	children := []any{
		&corev1.ConfigMap{ObjectMeta: meta, Data: site.Spec.Pages},
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: site.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "nginx", Image: image,
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
						VolumeMounts: []corev1.VolumeMount{{Name: "pages", MountPath: "/usr/share/nginx/html", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "pages", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: site.Name}},
					}}},
				},
			},
		}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		}},
	}
	if site.Spec.MinAvailable != nil {
		minAvailable := intstr.FromInt32(*site.Spec.MinAvailable)
		children = append(children, &policyv1.PodDisruptionBudget{ObjectMeta: meta, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels},
		}})
	}
	return declarative.State{
		Children: children,
		Status: v1alpha1.StaticSiteStatus{
			ObservedGeneration: site.Generation,
			URL:                fmt.Sprintf("http://%s.%s.svc", site.Name, site.Namespace),
			Conditions: declarative.NewConditions(site.Status.Conditions, site.Generation).
				True("Ready", "Applied", "every child is applied").List(),
		},
	}, nil
}
