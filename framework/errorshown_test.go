package framework_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// TestReconcileErrorsAreShownWithoutObjectData runs a reconciler failing
// with the API server's refusal of a Job whose template cannot change,
// which quotes the template and so a literal environment value, and one
// panicking with a value of several lines: the log, the debug endpoint and
// Explain say the refusal by field and cause without the value, and the
// panic on one line, its whole value in the log only.
func TestReconcileErrorsAreShownWithoutObjectData(t *testing.T) {
	const secret = "s3cr3t-710cfdfd6e21ff09"
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "migrate", Image: "shop:2", Env: []corev1.EnvVar{{Name: "DB_PASSWORD", Value: secret}},
	}}}}
	refusal := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "migrate",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template"), template, "field is immutable")})
	srv := fake.Start(t, fake.Options{Objects: []object.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "refused"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "panics"}},
	}})
	var logs testenv.Buffer
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{
		Logger:  logr.FromSlogHandler(slog.NewTextHandler(&logs, nil)),
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
	})
	r := reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Name == "panics" {
			panic("the first line\ngoroutine 7 [running]:\nmain.f()")
		}
		return reconcile.Result{}, fmt.Errorf("patch Job ns/migrate: %w", refusal)
	})
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "outcomes", framework.ControllerOptions{}).CompleteByKey(r); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "metrics served", func() bool { return mgr.MetricsAddress() != "" })

	const shown = `patch Job ns/migrate: Job.batch "migrate" is invalid: spec.template: Invalid value: field is immutable`
	var refused, panics introspect.KeyStatus
	testenv.Eventually(t, "both failed", func() bool {
		refused, panics = objectStatus(t, mgr, "refused"), objectStatus(t, mgr, "panics")
		return len(refused.History) > 0 && len(panics.History) > 0
	})
	if got := refused.History[0].Error; got != shown {
		t.Errorf("the history's error is\n%s\nwant\n%s", got, shown)
	}
	if got := panics.History[0].Error; got != "panic: the first line" {
		t.Errorf("the history's error of a panic is %q, want its first line", got)
	}
	for _, name := range []string{"refused", "panics"} {
		code, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/object?kind=ConfigMap&namespace=ns&name="+name)
		if code != http.StatusOK || strings.Contains(body, secret) || strings.Contains(body, "goroutine") {
			t.Errorf("the debug endpoint's answer for %s holds object data or a stack: %d %s", name, code, body)
		}
	}
	lines, _ := refused.Explain(time.Now())
	if text := strings.Join(lines, "\n"); strings.Contains(text, secret) || !strings.Contains(text, "last error: "+shown) {
		t.Errorf("Explain says:\n%s", text)
	}
	testenv.Eventually(t, "the failures are logged", func() bool {
		return strings.Contains(logs.String(), "spec.template: Invalid value: field is immutable") && strings.Contains(logs.String(), "goroutine 7")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret:\n%s", logs.String())
	}
}
