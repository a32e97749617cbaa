package declarative_test

import (
	"github.com/converge-dev/converge/internal/testenv"

	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/object"
)

// knobExample is the example of the Knob kind for Options.ChildKinds.
func knobExample() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(knob)
	return u
}

func TestChildLeftOutOfAKindNotServedHoldsNothingBack(t *testing.T) {
	testenv.InBothForms(t, testChildLeftOutOfAKindNotServedHoldsNothingBack)
}

func testChildLeftOutOfAKindNotServedHoldsNothingBack(t *testing.T) {
	// A Knob left out by IncludeWhen(false) is not declared: its kind, not
	// served, is never looked up, so the parent converges; a child After
	// it is left out with it, whether it names the Knob declared or
	// another object of its kind and name.
	r := startGraphWith(t, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, knobExample(), &batchv1.Job{}}}, func() []any {
		config := configMap("config")
		dial := newKnob("dial")
		return []any{
			declarative.NewChild(config),
			declarative.NewChild(dial).After(config).IncludeWhen(false),
			declarative.NewChild(job("after-dial")).After(dial),
			declarative.NewChild(configMap("after-named-dial")).After(newKnob("dial")),
		}
	})
	c := r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
	if c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
	r.settle()
	if r.get("after-dial", &batchv1.Job{}) || r.get("after-named-dial", &corev1.ConfigMap{}) {
		t.Error("a child After the Knob left out was applied")
	}
}

func TestChildAfterAnUndeclaredChildOfAKindNotServedSaysSo(t *testing.T) {
	testenv.InBothForms(t, testChildAfterAnUndeclaredChildOfAKindNotServedSaysSo)
}

func testChildAfterAnUndeclaredChildOfAKindNotServedSaysSo(t *testing.T) {
	// A child After a Knob that is not declared at all is a configuration
	// error, named as such, not the REST mapper's "no matches for kind".
	r := startGraphWith(t, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, knobExample()}}, func() []any {
		return []any{declarative.NewChild(configMap("after")).After(newKnob("dial"))}
	})
	r.waitReady(declarative.ChildGraphReason, "StaticSite ns/site: children: ConfigMap after is After Knob dial, which is not declared in State.Children")
}
