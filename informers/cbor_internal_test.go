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
		list runtime.Object // registered as ThingList when set
		want bool
	}{
		{"plain kind: its managedFields are stripped", &corev1.ConfigMap{}, nil, false},
		{"plain kind and its list", &corev1.ConfigMap{}, &corev1.ConfigMapList{}, false},
		{"kind with a RawExtension", &appsv1.ControllerRevision{}, nil, true},
		{"kind with nested metadata: a template's managedFields are not stripped", &appsv1.Deployment{}, nil, true},
		{"list of a kind with nested metadata", &corev1.ConfigMap{}, &appsv1.DeploymentList{}, true},
	} {
		s := runtime.NewScheme()
		s.AddKnownTypeWithName(gv.WithKind("Thing"), c.obj)
		if c.list != nil {
			s.AddKnownTypeWithName(gv.WithKind("ThingList"), c.list)
		}
		metav1.AddToGroupVersion(s, gv)
		if got := anyRawFields(s, gv); got != c.want {
			t.Errorf("%s: anyRawFields = %v, want %v", c.name, got, c.want)
		}
	}
}
