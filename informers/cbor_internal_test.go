package informers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAnyRawFields(t *testing.T) {
	gv := schema.GroupVersion{Group: "test.converge.dev", Version: "v1"}
	for _, c := range []struct {
		name string
		obj  runtime.Object
		want bool
	}{
		{"plain kind: managedFields are stripped", &corev1.ConfigMap{}, false},
		{"kind with a RawExtension", &appsv1.ControllerRevision{}, true},
	} {
		s := runtime.NewScheme()
		s.AddKnownTypeWithName(gv.WithKind("Thing"), c.obj)
		metav1.AddToGroupVersion(s, gv)
		if got := anyRawFields(s, gv); got != c.want {
			t.Errorf("%s: anyRawFields = %v, want %v", c.name, got, c.want)
		}
	}
}
