package declarative_test

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// A controller that runs one nginx Deployment per ConfigMap labelled
// app=web, with the image the ConfigMap names. converge applies the
// Deployment, owns it, re-applies it when someone changes it, and deletes it
// with its ConfigMap (or when Desired stops declaring it).
func ExampleNew() {
	ctx := context.Background() //nolint:forbidigo // in main: framework.SignalContext(context.Background())

	mgr, err := framework.NewManager(nil, framework.Options{}) // the kubeconfig, or the pod's service account
	if err != nil {
		fmt.Println(err)
		return
	}
	desired := func(_ context.Context, cm *corev1.ConfigMap) (declarative.State, error) {
		if cm.Labels["app"] != "web" {
			return declarative.State{}, nil // no children: any there were are deleted
		}
		labels := map[string]string{"app": cm.Name}
		return declarative.State{Children: []any{&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: cm.Name}, // in the ConfigMap's namespace
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "nginx", Image: cm.Data["image"],
					}}},
				},
			},
		}}}, nil
	}
	d, err := declarative.New(mgr, declarative.Func[*corev1.ConfigMap](desired), declarative.Options{
		ChildKinds: []object.Object{&appsv1.Deployment{}},
	})
	if err != nil {
		fmt.Println(err) // a configuration error (see ExampleNew_configurationError)
		return
	}
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "web", framework.ControllerOptions{}).Complete(d); err != nil {
		fmt.Println(err)
		return
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Println(err)
	}
}

// New fails on a configuration that breaks a rule, naming every broken
// rule, and nothing is watched.
func ExampleNew_configurationError() {
	// A manager is built without contacting its API server.
	mgr, err := framework.NewManager(&rest.Config{Host: "https://cluster.invalid"}, framework.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	noop := declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
		return declarative.State{}, nil
	})
	_, err = declarative.New(mgr, noop, declarative.Options{Finalizer: "cleanup"})
	fmt.Println(err)
	// Output:
	// declarative: Options.ChildKinds is empty; list an example object of every child kind
	// declarative: Options.Finalizer "cleanup" is not a valid finalizer name (it has no domain): use a domain-qualified name, like example.com/cleanup
}
