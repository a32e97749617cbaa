package cluster_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// A controller of every engaged cluster writes through the client of the
// cluster its request names.
func Example() {
	mgr, err := framework.NewManager(nil, framework.Options{
		Clusters: cluster.Options{Providers: []cluster.Provider{ /* secrets.New(...) */ }},
	})
	if err != nil {
		panic(err)
	}
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "labeller", framework.ControllerOptions{
		Clusters: cluster.Scope{Remote: true},
	}).Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
		c := cluster.From(ctx) // the cluster of this ConfigMap
		if cm.Labels["cluster"] == c.Name() {
			return reconcile.Result{}, nil
		}
		cp := cm.DeepCopy()
		if cp.Labels == nil {
			cp.Labels = map[string]string{}
		}
		cp.Labels["cluster"] = c.Name()
		return reconcile.Result{}, c.Client().Update(ctx, cp)
	}))
	if err != nil {
		panic(err)
	}
	_ = mgr.Start(context.Background())
}
