package fake_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/reconcile"
)

// A manager stopped before its controllers ever ran (its context done
// before the caches synced) leaves none of their goroutines behind: a
// test that cancels early leaks nothing.
func TestManagerStoppedBeforeItsControllersRanLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := fake.Start(t, fake.Options{})
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "never-runs", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("Manager.Start on a cancelled context: %v", err)
	}
	srv.Close()
}
