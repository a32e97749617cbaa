package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster is what the converge_cluster_* gauges read of one cluster the
// providers engaged or tried to (package cluster's Stats).
type Cluster struct {
	Name string
	// Engaged is true while the cluster is engaged (healthy or not), and
	// Healthy while it is engaged and its probes pass.
	Engaged, Healthy bool
	// Objects and Bytes are what its cache holds: objects, and their
	// estimated heap bytes with the values they share.
	Objects int
	Bytes   int64
}

// newClusterSeries makes the series of the clusters other than the
// manager's own. The series named after controller-runtime's count the
// reconciles of every cluster without a cluster label, so that a manager
// of one cluster exports exactly what it did and existing dashboards keep
// working; the converge_cluster_* series break them down by cluster, for
// the providers' clusters only (the manager's own is the rest), and are
// deleted when a cluster is disengaged.
func (m *Metrics) newClusterSeries() {
	m.clusterReconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "converge_cluster_reconciles_total",
		Help: "Total number of reconciliations of the keys of a cluster other than the manager's own, per controller, cluster and result (success, requeue_after, error, terminal, panic); controller_runtime_reconcile_total counts them too.",
	}, []string{"controller", "cluster", "result"})
	m.clusterTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "converge_cluster_reconcile_time_seconds",
		Help:    "Length of time per reconciliation of the keys of a cluster other than the manager's own, per controller and cluster.",
		Buckets: reconcileBuckets,
	}, []string{"controller", "cluster"})
	m.clusterEngaged = prometheus.NewDesc("converge_cluster_engaged",
		"1 while the cluster (other than the manager's own) is engaged, healthy or not; 0 while it is engaging or failed.", []string{"cluster"}, nil)
	m.clusterHealthy = prometheus.NewDesc("converge_cluster_healthy",
		"1 while the cluster is engaged and its probes (GET /readyz) pass; 0 otherwise (its keys wait).", []string{"cluster"}, nil)
	m.clusterObjects = prometheus.NewDesc("converge_cluster_cache_objects",
		"Number of objects the cache of an engaged cluster holds (summed over its informers).", []string{"cluster"}, nil)
	m.clusterBytes = prometheus.NewDesc("converge_cluster_cache_bytes",
		"Estimated heap bytes of the objects the cache of an engaged cluster holds, with the values they share.", []string{"cluster"}, nil)
}

// observeCluster counts a reconcile of a key of cluster by controller,
// unless the cluster was disengaged (a reconcile that ended after it).
func (m *Metrics) observeCluster(controller, cluster, result string, took time.Duration) {
	if _, gone := m.gone.Load(cluster); gone {
		return
	}
	m.clusterReconciles.WithLabelValues(controller, cluster, result).Inc()
	m.clusterTime.WithLabelValues(controller, cluster).Observe(took.Seconds())
}

// EngageCluster counts the reconciles of the cluster name from now on:
// it was engaged (again).
func (m *Metrics) EngageCluster(name string) { m.gone.Delete(name) }

// DeleteCluster deletes the reconcile series of a disengaged cluster, and
// drops the reconciles of its keys that end later.
func (m *Metrics) DeleteCluster(name string) {
	m.gone.Store(name, struct{}{})
	m.clusterReconciles.DeletePartialMatch(prometheus.Labels{"cluster": name})
	m.clusterTime.DeletePartialMatch(prometheus.Labels{"cluster": name})
}

// clusterCollector reports, at scrape time, each cluster's engagement,
// health and cache.
type clusterCollector struct{ m *Metrics }

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.clusterEngaged
	ch <- c.m.clusterHealthy
	ch <- c.m.clusterObjects
	ch <- c.m.clusterBytes
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.Clusters == nil {
		return
	}
	// A name may be known from several sources (one engaged, the others
	// refused as duplicates): one series per name, the engaged one's.
	byName := map[string]Cluster{}
	var names []string
	for _, cl := range c.m.Clusters() {
		prev, seen := byName[cl.Name]
		if !seen {
			names = append(names, cl.Name)
		}
		if !seen || (cl.Engaged && !prev.Engaged) {
			byName[cl.Name] = cl
		}
	}
	gauge := func(d *prometheus.Desc, v float64, name string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
	}
	for _, name := range names {
		cl := byName[name]
		gauge(c.m.clusterEngaged, b2f(cl.Engaged), name)
		gauge(c.m.clusterHealthy, b2f(cl.Healthy), name)
		if cl.Engaged {
			gauge(c.m.clusterObjects, float64(cl.Objects), name)
			gauge(c.m.clusterBytes, float64(cl.Bytes), name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
