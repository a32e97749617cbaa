package declarative_test

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
)

// The Desired of k8s.io/sample-controller's Foo controller: a Deployment
// per Foo, the Foo's status mirroring the Deployment's, an Event when the
// spec cannot be used. (ConfigMap stands in for the Foo type here.)
func ExampleLiveChild() {
	desired := func(ctx context.Context, foo *corev1.ConfigMap) (declarative.State, error) {
		name := foo.Data["deploymentName"]
		if name == "" {
			// Leave the Deployment there is, and say why.
			return declarative.State{KeepChildren: true, Events: []declarative.Event{{
				Type: corev1.EventTypeWarning, Reason: "InvalidSpec", Note: "deploymentName must be set",
			}}}, nil
		}
		var available int32
		deploy, err := declarative.LiveChild(ctx, &appsv1.Deployment{}, name)
		switch {
		case err == nil:
			available = deploy.Status.AvailableReplicas
		case !apierrors.IsNotFound(err): // not created yet: none available
			return declarative.State{}, err
		}
		return declarative.State{
			Children: []any{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name} /* spec */}},
			Status:   map[string]any{"availableReplicas": available},
		}, nil
	}
	_ = declarative.Func[*corev1.ConfigMap](desired)
}
