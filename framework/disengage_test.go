package framework_test

import (
	"context"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/faultproxy"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// A disengaged cluster keeps no connection to its API server: once its
// cache has stopped, the connection its watches held (HTTP/2, idle only
// after they ended) is closed, not left to the transport's idle timeout
// (90 s, longer than Eventually waits).
func TestDisengagedClusterKeepsNoConnection(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "edge-object", nil)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	edge := *cfg
	edge.Host = "https://" + proxy.Addr()

	f := newFleetOn(t, cfg, framework.Options{})
	mgr := f.mgr
	var edgeSeen seen
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "edge", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			if c := cluster.From(ctx); c.Name() == "edge-1" {
				edgeSeen.add(cm.Name)
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	e := <-f.engager
	if err := e.Engage(cluster.Target{Name: "edge-1", Config: &edge, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "edge-1's ConfigMap is reconciled, through the proxy", func() bool { return edgeSeen.has("edge-object") })
	if proxy.Open() == 0 {
		t.Fatal("edge-1 is engaged but holds no connection through its proxy")
	}
	e.Disengage("edge-1")
	testenv.Eventually(t, "edge-1 holds no connection through its proxy", func() bool { return proxy.Open() == 0 })
}

// A disengaged cluster's keys leave the controller's reconcile history at
// once; the manager's own cluster's stay.
func TestDisengagedClustersKeysLeaveTheReconcileHistory(t *testing.T) {
	local := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "local")}})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "edge"), memberConfigMap("ns", "only-edge", "edge")}})
	f := newFleetWith(t, local, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}})
	var calls seen
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "fleet", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(cluster.From(ctx).Name() + ":" + cm.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	e := f.start(t, edge.Config())
	testenv.Eventually(t, "every object is reconciled", func() bool {
		return calls.has(":cm") && calls.has("edge-1:cm") && calls.has("edge-1:only-edge")
	})
	testenv.Eventually(t, "metrics served", func() bool { return f.mgr.MetricsAddress() != "" })
	historyKeys := func() int {
		_, body := testenv.MetricsGet(t, f.mgr, introspect.Path+"api/state")
		for _, c := range decode[introspect.State](t, body).Controllers {
			if c.Name == "fleet" {
				return c.HistoryKeys
			}
		}
		t.Fatal("no controller fleet in the debug state")
		return 0
	}
	if n := historyKeys(); n != 3 {
		t.Fatalf("history keys while edge-1 is engaged = %d, want 3", n)
	}
	e.Disengage("edge-1")
	if n := historyKeys(); n != 1 {
		t.Fatalf("history keys after edge-1's disengagement = %d, want the manager's own cluster's 1", n)
	}
}

// A cluster on the manager's own API server (as cluster/namespaces makes)
// shares the manager's connection: disengaging it closes nothing the
// manager still uses, and the manager's own cluster goes on reconciling.
func TestDisengagingAClusterOfTheManagersAPIServerLeavesTheManagersConnection(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "before", nil)
	f := newFleetOn(t, cfg, framework.Options{})
	mgr := f.mgr
	var calls seen
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "both", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(cluster.From(ctx).Name() + ":" + cm.Namespace + "/" + cm.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	e := <-f.engager
	if err := e.Engage(cluster.Target{Name: "same", Config: cfg, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ConfigMap is reconciled in both clusters", func() bool {
		return calls.has("same:"+ns+"/before") && calls.has(":"+ns+"/before")
	})
	e.Disengage("same")
	testenv.CreateConfigMap(t, cs, ns, "after", nil)
	testenv.Eventually(t, "a new ConfigMap is reconciled in the manager's own cluster", func() bool { return calls.has(":" + ns + "/after") })
	if calls.has("same:" + ns + "/after") {
		t.Error("the disengaged cluster reconciled a new ConfigMap")
	}
}
