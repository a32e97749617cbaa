package reconcile_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/converge-dev/converge/reconcile"
)

func TestRequestString(t *testing.T) {
	for _, tc := range []struct {
		req  reconcile.Request
		want string
	}{
		{reconcile.Request{Namespace: "ns", Name: "a"}, "ns/a"},
		{reconcile.Request{Name: "node-1"}, "node-1"},
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
