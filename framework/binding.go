package framework

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// bindRemote returns the function that binds the sources of controller c
// (its primary source and srcs) to an engaged cluster other than the
// manager's own; tombstones, when not nil, keeps the last state of the
// deleted objects of each cluster.
func bindRemote[T object.Object](c *Controller, primary *kindSource[T], srcs []Source, tombstones func(cluster string) func(T)) binding.Bind {
	return func(cl *cluster.Cluster) (*binding.Binding, error) {
		target := &watchTarget{mgr: c.mgr, cluster: cl, name: c.name, owner: c.kind, queue: c.queue, log: c.log.WithValues("cluster", cl.Name())}
		pb, err := primary.bindKind(target)
		if err != nil {
			return nil, err
		}
		if tombstones != nil {
			pb.keepTombstones(tombstones(cl.Name()))
		}
		b := &binding.Binding{Cluster: cl, Sources: []binding.Source{remoteSource{pb}}, Reader: informers.Reader[T](pb.inf)}
		for _, src := range srcs {
			s, err := src.bind(target)
			if err != nil {
				return nil, err
			}
			b.Sources = append(b.Sources, remoteSource{s})
		}
		return b, nil
	}
}

// remoteSource is a source bound to another cluster's cache, as
// binding.Source.
type remoteSource struct{ s boundSource }

func (r remoteSource) String() string { return r.s.String() }
func (r remoteSource) Start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	return r.s.start(ctx)
}
func (r remoteSource) WaitForSync(ctx context.Context) error { return r.s.informer().WaitForSync(ctx) }
func (r remoteSource) RemoveListener(reg cache.ResourceEventHandlerRegistration) error {
	return r.s.informer().RemoveListener(reg)
}

// clusterFlow is the flow of a request: its cluster.
func clusterFlow(r reconcile.Request) string { return r.Cluster }

// clusterSeries is what the converge_cluster_* gauges read of stats: the
// clusters other than the manager's own.
func clusterSeries(stats []cluster.Stats) []metrics.Cluster {
	out := make([]metrics.Cluster, 0, len(stats))
	for _, st := range stats {
		if st.Cluster != "" {
			engaged := st.State == cluster.StateReady || st.State == cluster.StateUnhealthy
			out = append(out, metrics.Cluster{Name: st.Cluster, Engaged: engaged, Healthy: st.State == cluster.StateReady, Objects: st.Objects, Bytes: st.Bytes})
		}
	}
	return out
}

// clusterMetrics deletes a disengaged cluster's reconcile series.
type clusterMetrics struct{ m *metrics.Metrics }

func (clusterMetrics) Engaged(*cluster.Cluster)        {}
func (l clusterMetrics) Disengaged(c *cluster.Cluster) { l.m.DeleteCluster(c.Name()) }
