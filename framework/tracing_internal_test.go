package framework

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/reconcile"
)

// Each reconcile is one span named after the controller, carrying the
// object, the reconcile ID and the outcome; a failed reconcile's span has
// error status and the error recorded.
func TestReconcileSpans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		result string
	}{
		{"success", nil, metrics.ResultSuccess},
		{"error", errors.New("boom"), metrics.ResultError},
		{"terminal", reconcile.Terminal(errors.New("bad spec")), metrics.ResultTerminal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			c, _, _, _ := newTestController(t, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{}, tc.err
			}), 0)
			c.tracer = tp.Tracer("test")
			req := reconcile.Request{Namespace: "ns", Name: "obj"}
			c.reconcileOne(t.Context(), req, reconcile.ReasonChange, 1)
			c.reconcileOne(t.Context(), req, reconcile.ReasonChange, 1)

			ended := spans.Ended()
			if len(ended) != 2 {
				t.Fatalf("%d spans ended, want one per reconcile (2)", len(ended))
			}
			for i, s := range ended {
				if s.Name() != "reconcile test" {
					t.Errorf("span name %q, want %q", s.Name(), "reconcile test")
				}
				attrs := map[attribute.Key]attribute.Value{}
				for _, kv := range s.Attributes() {
					attrs[kv.Key] = kv.Value
				}
				for k, want := range map[attribute.Key]attribute.Value{
					"converge.controller":   attribute.StringValue("test"),
					"converge.namespace":    attribute.StringValue("ns"),
					"converge.name":         attribute.StringValue("obj"),
					"converge.reconcile_id": attribute.Int64Value(int64(i + 1)),
					"converge.result":       attribute.StringValue(tc.result),
				} {
					if got := attrs[k]; got != want {
						t.Errorf("span %d: %s = %v, want %v", i, k, got.Emit(), want.Emit())
					}
				}
				wantCode := codes.Unset
				if tc.err != nil {
					wantCode = codes.Error
				}
				if s.Status().Code != wantCode {
					t.Errorf("span %d: status %v, want %v", i, s.Status().Code, wantCode)
				}
				if tc.err != nil && (len(s.Events()) == 0 || s.Events()[0].Name != "exception") {
					t.Errorf("span %d: error not recorded as an exception event: %v", i, s.Events())
				}
			}
		})
	}
}
