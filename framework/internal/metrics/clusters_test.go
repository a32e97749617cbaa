package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-dev/converge/reconcile"
)

func TestClusterReconcilesAreBrokenDownForRemoteClustersOnly(t *testing.T) {
	m := New()
	c := m.ForController("fleet", 2)
	c.Observe("edge-1", ResultSuccess, reconcile.ReasonChange, time.Millisecond, false)
	c.Observe("", ResultSuccess, reconcile.ReasonChange, time.Millisecond, false)
	if got := testutil.ToFloat64(m.reconcileTotal.WithLabelValues("fleet", ResultSuccess)); got != 2 {
		t.Errorf("controller_runtime_reconcile_total{result=success} = %v, want 2 (every cluster's)", got)
	}
	if got := testutil.ToFloat64(m.clusterReconciles.WithLabelValues("fleet", "edge-1", ResultSuccess)); got != 1 {
		t.Errorf("converge_cluster_reconciles_total{cluster=edge-1} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.clusterReconciles); n != 1 {
		t.Errorf("%d converge_cluster_reconciles_total series, want 1 (none for the manager's own cluster)", n)
	}

	m.DeleteCluster("edge-1")
	c.Observe("edge-1", ResultError, reconcile.ReasonRetry, time.Millisecond, false) // ended after its cluster left
	if n := testutil.CollectAndCount(m.clusterReconciles) + testutil.CollectAndCount(m.clusterTime); n != 0 {
		t.Errorf("%d cluster series after the cluster was disengaged, want 0", n)
	}
	m.EngageCluster("edge-1")
	c.Observe("edge-1", ResultSuccess, reconcile.ReasonChange, time.Millisecond, false)
	if got := testutil.ToFloat64(m.clusterReconciles.WithLabelValues("fleet", "edge-1", ResultSuccess)); got != 1 {
		t.Errorf("converge_cluster_reconciles_total after re-engagement = %v, want 1", got)
	}
}

func TestClusterGaugesShowOneSeriesPerClusterName(t *testing.T) {
	m := New()
	m.Clusters = func() []Cluster {
		return []Cluster{
			{Name: "edge-1"}, // a duplicate source, refused
			{Name: "edge-1", Engaged: true, Healthy: true, Objects: 3, Bytes: 4096},
			{Name: "edge-1"}, // another
			{Name: "edge-2"}, // engaging
		}
	}
	want := `
# HELP converge_cluster_cache_objects Number of objects the cache of an engaged cluster holds (summed over its informers).
# TYPE converge_cluster_cache_objects gauge
converge_cluster_cache_objects{cluster="edge-1"} 3
# HELP converge_cluster_engaged 1 while the cluster (other than the manager's own) is engaged, healthy or not; 0 while it is engaging or failed.
# TYPE converge_cluster_engaged gauge
converge_cluster_engaged{cluster="edge-1"} 1
converge_cluster_engaged{cluster="edge-2"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "converge_cluster_engaged", "converge_cluster_cache_objects"); err != nil {
		t.Error(err)
	}
}
