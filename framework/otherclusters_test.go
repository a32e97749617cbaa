package framework_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// A controller of the manager's own cluster watches another cluster's
// Secrets through InOtherClusters: their events, and the engagement,
// reconcile its own ConfigMap, and its own kind is not watched there.
func TestInOtherClustersReconcilesTheOwnClusterOnAnotherClustersEvents(t *testing.T) {
	local := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "hub", "x")}})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "edge-only", "y")}})
	f := newFleet(t, local)
	var calls, mapped, engaged seen
	toHub := func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
		mapped.add(fmt.Sprintf("%q %s", cluster.From(ctx).Name(), s.Name))
		return []reconcile.Request{{Namespace: "ns", Name: "hub"}}
	}
	onEngaged := func(ctx context.Context) []reconcile.Request {
		engaged.add(cluster.From(ctx).Name())
		return []reconcile.Request{{Namespace: "ns", Name: "waited"}}
	}
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "hub", framework.ControllerOptions{}).
		Watches(framework.InOtherClusters(framework.Map(toHub), onEngaged)).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			calls.add(fmt.Sprintf("%q %s", cluster.From(ctx).Name(), req))
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edge.Config())
	testenv.Eventually(t, "the engagement queues what it returns, in the manager's own cluster", func() bool {
		return engaged.has("edge-1") && calls.has(`"" ns/waited`)
	})
	before := len(calls.all())
	edgeMgr := testenv.NewManager(t, edge.Config(), framework.Options{})
	if err := edgeMgr.Client().Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "member-secret"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Map saw edge-1's Secret in edge-1", func() bool { return mapped.has(`"edge-1" member-secret`) })
	testenv.Eventually(t, "the hub is reconciled in the manager's own cluster", func() bool {
		return slices.Contains(calls.all()[before:], `"" ns/hub`)
	})
	for _, c := range calls.all() {
		if !strings.HasPrefix(c, `"" `) {
			t.Errorf("reconciled %s, want only keys of the manager's own cluster (edge-1's ConfigMaps are not watched)", c)
		}
	}
	for _, m := range mapped.all() {
		if !strings.HasPrefix(m, `"edge-1" `) {
			t.Errorf("mapped %s, want only edge-1's Secrets (InOtherClusters does not watch the manager's own cluster)", m)
		}
	}
}

func TestInOtherClustersIsRefusedInAControllerOfEveryCluster(t *testing.T) {
	local := fake.Start(t, fake.Options{})
	f := newFleet(t, local)
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "every", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Watches(framework.InOtherClusters(framework.Map(func(context.Context, *corev1.Secret) []reconcile.Request { return nil }), nil)).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err == nil || !strings.Contains(err.Error(), "InOtherClusters in a controller of every cluster") {
		t.Fatalf("Complete = %v, want InOtherClusters refused in a Remote controller", err)
	}
}

// What waits for another cluster to be usable waits for its return to
// health as for its engagement: InOtherClusters' engaged runs again when
// the cluster turns healthy after being unhealthy, and its requests are
// queued.
func TestInOtherClustersWakesWhatWaitsWhenAClusterIsHealthyAgain(t *testing.T) {
	local := fake.Start(t, fake.Options{})
	edge := fake.Start(t, fake.Options{})
	var fail atomic.Bool
	edgeCfg := edge.Config()
	edgeCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return failingReadyz{rt, &fail} }
	f := newFleetWith(t, local, framework.Options{Clusters: cluster.Options{Health: cluster.HealthOptions{Interval: 10 * time.Millisecond, FailureThreshold: 2}}})
	var calls seen
	var wakes atomic.Int64
	onEngaged := func(context.Context) []reconcile.Request {
		n := wakes.Add(1)
		return []reconcile.Request{{Namespace: "ns", Name: fmt.Sprintf("wake-%d", n)}}
	}
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "hub", framework.ControllerOptions{}).
		Watches(framework.InOtherClusters(framework.Map(func(context.Context, *corev1.Secret) []reconcile.Request { return nil }), onEngaged)).
		CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			calls.add(req.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edgeCfg)
	testenv.Eventually(t, "the engagement wakes what waits", func() bool { return calls.has("wake-1") })
	state := func() cluster.State {
		cl, err := f.mgr.Clusters().Get("edge-1")
		if err != nil {
			return ""
		}
		return cl.Health().State
	}
	fail.Store(true)
	testenv.Eventually(t, "edge-1 turns unhealthy", func() bool { return state() == cluster.StateUnhealthy })
	if n := wakes.Load(); n != 1 {
		t.Errorf("engaged ran %d times by the time edge-1 turned unhealthy, want 1", n)
	}
	fail.Store(false)
	testenv.Eventually(t, "the return to health wakes what waits", func() bool { return calls.has("wake-2") })
}
