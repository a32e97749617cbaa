package declarative

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// refusal is the API server's answer to an update that changes fields.
func refusal(errs ...*field.Error) error {
	return fmt.Errorf("patch Job ns/migrate: %w", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "migrate", field.ErrorList(errs)))
}

func TestImmutableAndItsCause(t *testing.T) {
	template := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "migrate", "image": "busybox:2", "command": strings.Repeat("x", 300)}}}}
	for _, tc := range []struct {
		name      string
		err       error
		immutable bool
		cause     string
	}{
		{"a Job's template", refusal(field.Invalid(field.NewPath("spec", "template"), template, "field is immutable")), true,
			"the API server answered 422 Invalid: spec.template: Invalid value: field is immutable"},
		{"a custom validation's word", refusal(field.Invalid(field.NewPath("spec", "size"), 3, "Value is immutable")), true,
			"the API server answered 422 Invalid: spec.size: Invalid value: Value is immutable"}, // a value, however short, may be a secret
		{"another invalid field", refusal(field.Required(field.NewPath("spec", "template", "spec", "containers"), "")), false,
			"the API server answered 422 Invalid: spec.template.spec.containers: Required value"},
		{"a conflict", fmt.Errorf("apply: %w", apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate", errors.New("the object has been modified"))), false,
			"the API server answered 409 Conflict: Operation cannot be fulfilled on jobs.batch \"migrate\": the object has been modified"},
		{"not the API server's", errors.New("connection refused"), false, "connection refused"},
	} {
		if got := immutable(tc.err); got != tc.immutable {
			t.Errorf("%s: immutable = %v, want %v", tc.name, got, tc.immutable)
		}
		if got := applyCause(tc.err); got != tc.cause {
			t.Errorf("%s: applyCause =\n%q, want\n%q", tc.name, got, tc.cause)
		}
	}
}

func TestRanRecordIsTheParentsOwnOnly(t *testing.T) {
	parent := &metav1.ObjectMeta{UID: "p", Annotations: map[string]string{RanAnnotation: "p h1=Job.batch/ns/a h2=Job.batch/ns/b"}}
	if got := parseRan(parent); len(got) != 2 || got["Job.batch/ns/a"] != "h1" || got["Job.batch/ns/b"] != "h2" {
		t.Errorf("parseRan = %v, want both runs", got)
	}
	if got := formatRan("p", parseRan(parent)); got != parent.Annotations[RanAnnotation] {
		t.Errorf("formatRan(parseRan) = %q, want %q", got, parent.Annotations[RanAnnotation])
	}
	// Copied with another parent's YAML: records nothing, so the child runs.
	copied := &metav1.ObjectMeta{UID: "q", Annotations: parent.Annotations}
	if got := parseRan(copied); len(got) != 0 {
		t.Errorf("parseRan of another parent's record = %v, want none", got)
	}
}

func TestCRDOfNamesTheDefinitionOfCustomKindsOnly(t *testing.T) {
	for gvk, want := range map[schema.GroupVersionKind]string{
		{Group: "e2e.converge.dev", Version: "v1", Kind: "Knob"}:                "CustomResourceDefinition knobs.e2e.converge.dev (kind Knob.e2e.converge.dev is not served)",
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}:  "CustomResourceDefinition httproutes.gateway.networking.k8s.io (kind HTTPRoute.gateway.networking.k8s.io is not served)",
		{Group: "networking.k8s.io", Version: "v1alpha9", Kind: "IngressClass"}: "kind IngressClass networking.k8s.io/v1alpha9 to be served",
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}:           "kind PodDisruptionBudget policy/v1 to be served",
	} {
		if got := crdOf(gvk); got != want {
			t.Errorf("crdOf(%v) = %q, want %q", gvk, got, want)
		}
	}
}
