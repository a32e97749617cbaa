package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// The smallest reconciler: a function that looks at one object by name.
func ExampleFunc() {
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		fmt.Println("reconciling", req)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	})

	res, err := r.Reconcile(context.Background(), reconcile.Request{Namespace: "default", Name: "web"})
	fmt.Println(res.RequeueAfter, err)
	// Output:
	// reconciling default/web
	// 1m0s <nil>
}

// A terminal error stops retries, even when wrapped.
func ExampleTerminal() {
	err := fmt.Errorf("reconcile default/web: %w", reconcile.Terminal(errors.New("spec.replicas must be positive")))
	fmt.Println(reconcile.IsTerminal(err))
	fmt.Println(err)
	// Output:
	// true
	// reconcile default/web: terminal error: spec.replicas must be positive
}
