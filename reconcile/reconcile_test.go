package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

func TestRequestString(t *testing.T) {
	for _, tc := range []struct {
		req  reconcile.Request
		want string
	}{
		{reconcile.Request{Namespace: "ns", Name: "a"}, "ns/a"},
		{reconcile.Request{Name: "node-1"}, "node-1"},
		{reconcile.Request{Cluster: "edge-1", Namespace: "ns", Name: "a"}, "edge-1:ns/a"},
		{reconcile.Request{Cluster: "edge-1", Name: "node-1"}, "edge-1:node-1"},
	} {
		if got := tc.req.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.req, got, tc.want)
		}
	}
}

func TestTerminal(t *testing.T) {
	base := errors.New("bad spec")
	for _, tc := range []struct {
		name     string
		err      error
		terminal bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"terminal", reconcile.Terminal(base), true},
		{"wrapped terminal", fmt.Errorf("ctx: %w", reconcile.Terminal(base)), true},
		{"terminal wrapping wrapped", reconcile.Terminal(fmt.Errorf("ctx: %w", base)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconcile.IsTerminal(tc.err); got != tc.terminal {
				t.Errorf("IsTerminal(%v) = %v, want %v", tc.err, got, tc.terminal)
			}
			if tc.terminal {
				if !errors.Is(tc.err, base) {
					t.Errorf("errors.Is(%v, base) = false; Terminal must keep the cause reachable", tc.err)
				}
				if !errors.Is(tc.err, &reconcile.TerminalError{}) {
					t.Errorf("errors.Is(%v, &TerminalError{}) = false", tc.err)
				}
			}
		})
	}
	if reconcile.Terminal(nil) != nil {
		t.Error("Terminal(nil) must be nil so `return res, reconcile.Terminal(err)` is safe")
	}
}

func TestResultIsZero(t *testing.T) {
	if !(reconcile.Result{}).IsZero() {
		t.Error("zero Result reports non-zero")
	}
	if (reconcile.Result{RequeueAfter: 1}).IsZero() {
		t.Error("Result with RequeueAfter reports zero")
	}
}

func TestSequence(t *testing.T) {
	var ran []string
	step := func(name string, res reconcile.Result, err error) reconcile.ObjectReconciler[string] {
		return reconcile.ObjectFunc[string](func(_ context.Context, obj string) (reconcile.Result, error) {
			ran = append(ran, name+":"+obj)
			return res, err
		})
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		steps   []reconcile.ObjectReconciler[string]
		ran     []string
		requeue time.Duration
		err     error
	}{
		{"empty", nil, nil, 0, nil},
		{"all run, shortest requeue wins", []reconcile.ObjectReconciler[string]{
			step("a", reconcile.Result{RequeueAfter: time.Minute}, nil),
			step("b", reconcile.Result{}, nil),
			step("c", reconcile.Result{RequeueAfter: time.Second}, nil),
		}, []string{"a:x", "b:x", "c:x"}, time.Second, nil},
		{"stops at the first error", []reconcile.ObjectReconciler[string]{
			step("a", reconcile.Result{}, nil),
			step("b", reconcile.Result{}, boom),
			step("c", reconcile.Result{}, nil),
		}, []string{"a:x", "b:x"}, 0, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			res, err := reconcile.Sequence(tc.steps...).Reconcile(t.Context(), "x")
			if !errors.Is(err, tc.err) || res.RequeueAfter != tc.requeue || fmt.Sprint(ran) != fmt.Sprint(tc.ran) {
				t.Errorf("got (%v, %v) after %v; want (%v, %v) after %v", res.RequeueAfter, err, ran, tc.requeue, tc.err, tc.ran)
			}
		})
	}
}
