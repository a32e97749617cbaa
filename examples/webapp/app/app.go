// Package app is the WebApp controller's logic: the children, their order
// and readiness, and the status that should exist for one WebApp. Command
// webapp runs it; tests import it.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/webapp/api/v1alpha1"
	"github.com/converge-dev/converge/object"
)

// Children returns an object of each kind Desired may declare, for
// declarative.Options.ChildKinds.
func Children() []object.Object {
	return []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
}

// Desired is the whole controller: what should exist for one WebApp, in
// order. The settings come first; the migration Job of the current image
// runs once they exist, and once only: Kubernetes deletes it some minutes
// after it completed (ttlSecondsAfterFinished), and it is not created
// again; the Deployment gets the image only once that Job is Complete
// (until then it keeps running the previous one); the Service
// comes once the Deployment serves; the PodDisruptionBudget exists while
// spec.minAvailable is set. converge writes the Ready condition.
func Desired(_ context.Context, web *v1alpha1.WebApp) (declarative.State, error) {
	config, migrate, deploy, svc, pdb := objects(web)
	// README begin
	children, waitFor := []any{config}, []object.Object{config} // waitFor: what the Deployment is After
	if migrate != nil {
		children = append(children, declarative.NewChild(migrate).After(config).RunOnce()) // Complete once per image
		waitFor = append(waitFor, migrate)
	}
	children = append(children,
		declarative.NewChild(deploy).After(waitFor...).
			ReadyWhen("serving", func(d *appsv1.Deployment) bool { // one pod is enough
				return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas >= min(1, ptr.Deref(d.Spec.Replicas, 1))
			}),
		declarative.NewChild(svc).After(deploy),
		declarative.NewChild(pdb).After(deploy).IncludeWhen(web.Spec.MinAvailable != nil), // pruned when unset
	)
	return declarative.State{Children: children, Status: v1alpha1.WebAppStatus{ObservedGeneration: web.Generation}}, nil
	// status.conditions: Ready=False Waiting "Deployment shop waits for Job shop-migrate-1f3a09c2 (Complete) since ..."
	// README end
}

// objects returns the children of web: the migration Job is nil when there
// is no migration, the PodDisruptionBudget an empty one when there is none
// (it is then not declared).
func objects(web *v1alpha1.WebApp) (*corev1.ConfigMap, *batchv1.Job, *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget) {
	labels := map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": web.Name}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Labels: labels} }
	config := &corev1.ConfigMap{ObjectMeta: meta(web.Name + "-settings"), Data: web.Spec.Settings}
	env := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: config.Name}}}}

	var migrate *batchv1.Job
	if len(web.Spec.Migrate) > 0 {
		// A Job's pod template cannot change: each image and command gets its
		// own Job (named by content), and the one of the previous image is
		// pruned, unless Kubernetes deleted it already.
		sum := sha256.Sum256([]byte(web.Spec.Image + "\x00" + strings.Join(web.Spec.Migrate, "\x00")))
		migrate = &batchv1.Job{ObjectMeta: meta(web.Name + "-migrate-" + hex.EncodeToString(sum[:4])), Spec: batchv1.JobSpec{
			BackoffLimit:            new(int32(3)),
			TTLSecondsAfterFinished: new(int32(600)),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: web.Spec.Image, Command: web.Spec.Migrate, EnvFrom: env}},
			}},
		}}
	}

	podLabels := map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": web.Name, "app.kubernetes.io/component": "server"}
	deploy := &appsv1.Deployment{ObjectMeta: meta(web.Name), Spec: appsv1.DeploymentSpec{
		Replicas: web.Spec.Replicas,
		Selector: &metav1.LabelSelector{MatchLabels: podLabels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: web.Spec.Image, EnvFrom: env,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		}},
	}}
	svc := &corev1.Service{ObjectMeta: meta(web.Name), Spec: corev1.ServiceSpec{
		Selector: podLabels,
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: meta(web.Name)}
	if web.Spec.MinAvailable != nil {
		minAvailable := intstr.FromInt32(*web.Spec.MinAvailable)
		pdb.Spec = policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: podLabels}}
	}
	return config, migrate, deploy, svc, pdb
}
