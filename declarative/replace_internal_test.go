package declarative

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
			"the API server answered 422 Invalid: spec.size: Invalid value: 3: Value is immutable"},
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
