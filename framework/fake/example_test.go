package fake_test

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// A controller that copies each ConfigMap's "greeting" into an annotation,
// run by a real manager on the fake API server.
func Example() {
	srv, err := fake.NewServer(fake.Options{Objects: []object.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}, Data: map[string]string{"greeting": "hi"}},
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	mgr, err := framework.NewManager(srv.Config(), framework.Options{})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	var greeted sync.Once
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "greeter", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			if cm.Annotations["greeted"] != "" {
				return reconcile.Result{}, nil
			}
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"greeted":%q}}}`, cm.Data["greeting"])
			if err := mgr.Client().Patch(ctx, cm.DeepCopy(), types.MergePatchType, patch); err != nil {
				return reconcile.Result{}, err
			}
			greeted.Do(func() { close(done) })
			return reconcile.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- mgr.Start(ctx) }()
	<-done
	cancel()
	if err := <-stopped; err != nil {
		panic(err)
	}

	got := &corev1.ConfigMap{}
	if err := mgr.APIReader().Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "hello"}, got); err != nil {
		panic(err)
	}
	fmt.Println("greeted:", got.Annotations["greeted"])
	// Output: greeted: hi
}
