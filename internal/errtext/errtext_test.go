package errtext_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/converge-dev/converge/internal/errtext"
)

const secret = "s3cr3t-710cfdfd6e21ff09"

// template is a pod template holding secret as a literal environment
// value, as the API server quotes it back when a Job's template cannot
// change.
var template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
	Name: "migrate", Image: "shop:2", Env: []corev1.EnvVar{{Name: "DB_PASSWORD", Value: secret}},
}}}}

// goValue prints with %#v only: encoding/json cannot marshal a channel.
type goValue struct {
	Password string
	C        chan int
}

func invalid(errs ...*field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "migrate", errs)
}

func TestOfLeavesOutTheValuesTheServerQuotes(t *testing.T) {
	immutable := invalid(field.Invalid(field.NewPath("spec", "template"), template, "field is immutable"))
	if !strings.Contains(immutable.Error(), secret) {
		t.Fatalf("the test's error does not quote the secret: %v", immutable)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a template", fmt.Errorf("patch Job ns/migrate: %w", immutable),
			`patch Job ns/migrate: Job.batch "migrate" is invalid: spec.template: Invalid value: field is immutable`},
		{"several causes", invalid(
			field.Invalid(field.NewPath("spec", "template"), template, "field is immutable"),
			field.NotSupported(field.NewPath("spec", "completionMode"), secret, []string{"NonIndexed", "Indexed"}),
			field.Duplicate(field.NewPath("spec", "x"), secret),
			field.Required(field.NewPath("spec", "y"), "a y is required"),
			field.TooMany(field.NewPath("spec", "z"), 5, 3),
		), `Job.batch "migrate" is invalid: [spec.template: Invalid value: field is immutable, spec.completionMode: Unsupported value: supported values: "NonIndexed", "Indexed", spec.x: Duplicate value, spec.y: Required value: a y is required, spec.z: Too many: must have at most 3 items]`},
		{"a short string", invalid(field.Invalid(field.NewPath("spec", "env"), secret, "must be short")),
			`Job.batch "migrate" is invalid: spec.env: Invalid value: must be short`},
		{"a Go value", invalid(field.Invalid(field.NewPath("spec"), goValue{Password: secret}, "bad")),
			`Job.batch "migrate" is invalid: spec: Invalid value: bad`},
		{"joined, on one line", errors.Join(errors.New("apply ConfigMap ns/a: boom"), fmt.Errorf("patch Job ns/migrate: %w", immutable)),
			`apply ConfigMap ns/a: boom; patch Job ns/migrate: Job.batch "migrate" is invalid: spec.template: Invalid value: field is immutable`},
		{"not the API server's", errors.New("plain: error"), "plain: error"},
		{"a resource not served", apierrors.NewGenericServerResponse(404, "patch", schema.GroupResource{Group: "backup.example.com", Resource: "backups"}, "b", "404 page not found", 0, true),
			"the server could not find the requested resource (patch backups.backup.example.com b)"},
		{"nil", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errtext.Of(tc.err)
			if got != tc.want {
				t.Errorf("Of =\n%s\nwant\n%s", got, tc.want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("Of holds the secret: %s", got)
			}
			if e := errtext.Error(tc.err); (e == nil) != (tc.err == nil) || e != nil && (e.Error() != tc.want || !errors.Is(e, tc.err)) {
				t.Errorf("Error = %v, want an error saying Of's text and wrapping the error", e)
			}
		})
	}
}

func TestCauseSaysTheFieldAndTheShortCause(t *testing.T) {
	var status apierrors.APIStatus
	if !errors.As(invalid(field.Invalid(field.NewPath("spec", "template"), template, "field is immutable")), &status) {
		t.Fatal("not a status")
	}
	c := status.Status().Details.Causes[0]
	if got, want := errtext.Cause(c), "spec.template: Invalid value: field is immutable"; got != want {
		t.Errorf("Cause = %q, want %q", got, want)
	}
	if got, want := errtext.Cause(metav1.StatusCause{Message: "Forbidden: no"}), "Forbidden: no"; got != want {
		t.Errorf("Cause = %q, want %q", got, want)
	}
}
