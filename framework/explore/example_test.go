package explore_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/reconcile"
)

// Check explores a controller that keeps a Secret per ConfigMap through
// a scenario of two steps, on framework/fake: every schedule (the
// fault-free reference and nine with 409s, 500s, crashes and lagging
// watches) keeps the invariant. In a test, explore.Run(t, opts) does
// the same and fails t with the report of a broken property.
func ExampleCheck() {
	setup := func(mgr *framework.Manager) error { // what the program's main calls
		c := mgr.Client()
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "secrets", framework.ControllerOptions{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-secret"}}
				if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
					return reconcile.Result{}, err // retried with backoff
				}
				return reconcile.Result{}, nil
			}))
	}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	hasSecret := explore.Invariant{Name: "each ConfigMap has its Secret", Check: func(ctx context.Context, s *explore.Snapshot) error {
		for _, name := range []string{"a", "b"}[:s.Steps()] {
			if _, ok, err := explore.Get[*corev1.Secret](ctx, s, types.NamespacedName{Namespace: "ns", Name: name + "-secret"}); err != nil || !ok {
				return fmt.Errorf("ConfigMap ns/%s has no Secret (%v)", name, err)
			}
		}
		return nil
	}}
	f, err := explore.Check(context.Background(), explore.Options{
		Setup:     setup,
		Steps:     []explore.Step{explore.Create(cm("a")), explore.Create(cm("b"))},
		Converged: []explore.Invariant{hasSecret},
		Schedules: 10,
	})
	fmt.Println(f, err)
	// Output: <nil> <nil>
}
