package explore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/reconcile"
)

func TestInvalidOptionsNameTheField(t *testing.T) {
	_, err := explore.Check(t.Context(), explore.Options{
		Steps:      []explore.Step{{Name: "nothing"}},
		Converged:  []explore.Invariant{{Name: "x"}},
		Invariants: []explore.Invariant{{Check: func(context.Context, *explore.Snapshot) error { return nil }}},
		Faults:     explore.FaultOptions{Kinds: []explore.FaultKind{99, explore.Hold}},
	})
	for _, want := range []string{"Options.Setup is nil", `Options.Steps[0] ("nothing") has no Do`, `Options.Converged[0] ("x") has no Check`,
		"Options.Invariants[0] has no Name", "Options.Faults.Kinds[0] is 99", "Options.Faults.Kinds[1] is Hold, which needs a test control plane"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
}

// A controller that never succeeds fails the fault-free schedule, and the
// report names the controller, the key and its error.
func TestNotConvergingNamesTheKey(t *testing.T) {
	f, err := explore.Check(t.Context(), explore.Options{
		Setup: func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.ConfigMap](mgr, "broken", framework.ControllerOptions{}).
				Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) {
					return reconcile.Result{}, errors.New("no database")
				}))
		},
		Steps:           []explore.Step{explore.Create(configMap("a"))},
		ConvergeTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Broken != "convergence" || f.Schedule != 0 {
		t.Fatalf("got %v, want the reference schedule not converging", f)
	}
	for _, want := range []string{`controller "broken"`, "ns/a", "no database", "fault-free reference schedule"} {
		if !strings.Contains(f.Error(), want) {
			t.Errorf("the report does not say %q:\n%s", want, f)
		}
	}
}
