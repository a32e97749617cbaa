package framework_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// The metrics, the debug state and the object API name the clusters other
// than the manager's own; the series of a disengaged cluster go with it.
func TestRemoteClustersAreVisibleInMetricsAndTheDebugEndpoint(t *testing.T) {
	local := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "local")}})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "edge"), memberConfigMap("ns", "only-edge", "edge")}})
	f := &fleet{engager: make(chan cluster.Engager, 1)}
	f.mgr = testenv.NewManager(t, local.Config(), framework.Options{
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		Clusters: cluster.Options{Providers: []cluster.Provider{cluster.ProviderFunc(func(ctx context.Context, e cluster.Engager) error {
			f.engager <- e
			<-ctx.Done()
			return nil
		})}},
	})
	var calls seen
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "fleet", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(cluster.From(ctx).Name() + ":" + cm.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "own", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) { return reconcile.Result{}, nil })); err != nil {
		t.Fatal(err)
	}
	e := f.start(t, edge.Config())
	testenv.Eventually(t, "edge-1's objects are reconciled", func() bool { return calls.has("edge-1:cm") && calls.has("edge-1:only-edge") })
	testenv.Eventually(t, "metrics served", func() bool { return f.mgr.MetricsAddress() != "" })

	_, metrics := testenv.MetricsGet(t, f.mgr, "/metrics")
	for _, want := range []string{
		`converge_cluster_reconciles_total{cluster="edge-1",controller="fleet",result="success"} `,
		`converge_cluster_engaged{cluster="edge-1"} 1`,
		`converge_cluster_healthy{cluster="edge-1"} 1`,
		`converge_cluster_cache_objects{cluster="edge-1"} 2`,
		`controller_runtime_reconcile_total{controller="fleet",result="success"} `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	code, body := testenv.MetricsGet(t, f.mgr, introspect.Path+"api/state")
	state := decode[introspect.State](t, body)
	i := slices.IndexFunc(state.Clusters, func(c introspect.ClusterStatus) bool { return c.Name == "edge-1" })
	if code != http.StatusOK || len(state.Clusters) != 2 || state.Clusters[0].Name != "" || i < 0 {
		t.Fatalf("state %d: clusters %+v; want the manager's own and edge-1", code, state.Clusters)
	}
	if c := state.Clusters[i]; c.State != "ready" || c.Informers != 1 || c.Objects != 2 || c.Bytes <= 0 {
		t.Errorf("edge-1 in the debug state: %+v; want ready, its ConfigMap informer's 2 objects and their bytes", c)
	}

	_, body = testenv.MetricsGet(t, f.mgr, introspect.Path+"api/object?kind=ConfigMap&namespace=ns&name=only-edge&cluster=edge-1")
	obj := decode[introspect.ObjectStatus](t, body)
	byName := map[string]introspect.KeyStatus{}
	for _, ks := range obj.Controllers {
		byName[ks.Controller] = ks
	}
	if ks := byName["fleet"]; obj.Cluster != "edge-1" || !ks.Cached || ks.Unwatched || len(ks.History) == 0 {
		t.Errorf("only-edge in edge-1, controller fleet: %+v; want cached and reconciled", ks)
	}
	if ks := byName["own"]; !ks.Unwatched {
		t.Errorf("only-edge in edge-1, controller own: %+v; want unwatched", ks)
	}
	_, body = testenv.MetricsGet(t, f.mgr, introspect.Path+"api/object?kind=ConfigMap&namespace=ns&name=only-edge")
	ks := decode[introspect.ObjectStatus](t, body).Controllers
	if len(ks) == 0 || ks[0].Cached {
		t.Fatalf("only-edge in the manager's own cluster: %+v; want not cached (it is edge-1's)", ks)
	}
	for _, k := range ks {
		lines, _ := k.Explain(time.Now())
		hint := strings.Contains(lines[0], "the controller also watches cluster edge-1: name one (converge explain --cluster NAME)")
		if k.Controller == "fleet" && (!slices.Equal(k.OtherClusters, []string{"edge-1"}) || !hint) {
			t.Errorf("only-edge, not in the manager's own cluster, controller fleet: %q (other clusters %v); want a hint to name edge-1", lines, k.OtherClusters)
		}
		if k.Controller == "own" && (k.OtherClusters != nil || hint) {
			t.Errorf("only-edge, controller own (the manager's own cluster only): %q; want no hint", lines)
		}
	}

	e.Disengage("edge-1")
	testenv.Eventually(t, "edge-1's series are deleted", func() bool {
		_, metrics := testenv.MetricsGet(t, f.mgr, "/metrics")
		return !strings.Contains(metrics, `cluster="edge-1"`)
	})
}
