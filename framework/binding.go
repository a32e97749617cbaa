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
	"github.com/converge-dev/converge/workqueue"
)

// bindRemote returns the function that binds the sources of controller c
// (its primary source, unless nil, and srcs) to an engaged cluster other
// than the manager's own; tombstones, when not nil, keeps the last state of the
// deleted objects of each cluster.
func bindRemote[T object.Object](c *Controller, primary *kindSource[T], srcs []Source, tombstones func(cluster string) func(T)) binding.Bind {
	return func(cl *cluster.Cluster) (*binding.Binding, error) {
		target := &watchTarget{mgr: c.mgr, cluster: cl, name: c.name, owner: c.kind, queue: c.queue, log: c.log.WithValues("cluster", cl.Name())}
		b := &binding.Binding{Cluster: cl}
		if primary != nil {
			pb, err := primary.bindKind(target)
			if err != nil {
				return nil, err
			}
			if tombstones != nil {
				pb.keepTombstones(tombstones(cl.Name()))
			}
			b.Sources, b.Reader = []binding.Source{remoteSource{pb}}, informers.Reader[T](pb.inf)
		}
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

// bindClusters returns the bindings of controller c to the engaged clusters
// other than the manager's own, with its queue q: of its primary source and
// every other source with ControllerOptions.Clusters.Remote, else of the
// sources of InOtherClusters; nil when there are none.
func (b *Builder[T]) bindClusters(c *Controller, primary *kindSource[T], q *workqueue.Queue[reconcile.Request], tombstones func(string) func(T)) *binding.Set {
	switch {
	case b.opts.Clusters.Remote:
		return binding.New(c.name, bindRemote(c, primary, b.sources, tombstones), binding.ForgetOnDrop(q, func(cl string) { c.history.ForgetCluster(cl) }), c.log, b.opts.Clusters.OnEngaged, b.mgr.gate.Registry())
	case len(b.others) > 0:
		// Not in the registry that hands spread clusters over: its keys
		// are the manager's own cluster's, and its writes to a member go
		// through that cluster's fenced client.
		return binding.New(c.name, bindRemote[T](c, nil, b.others, nil), binding.InOwnCluster(q), c.log, engagedOf(b.others), nil).OnHealthyAgain()
	}
	return nil
}

// otherSource is a source InOtherClusters made.
type otherSource interface {
	inOthers() bool
	onEngaged(ctx context.Context) []reconcile.Request
}

func (s *kindSource[C]) inOthers() bool { return s.others }
func (s *kindSource[C]) onEngaged(ctx context.Context) []reconcile.Request {
	if s.engaged == nil {
		return nil
	}
	return s.engaged(ctx)
}

// engagedOf is the cluster.Scope.OnEngaged of srcs, otherSources.
func engagedOf(srcs []Source) func(context.Context, *cluster.Cluster) []reconcile.Request {
	return func(ctx context.Context, _ *cluster.Cluster) (out []reconcile.Request) {
		for _, s := range srcs {
			out = append(out, s.(otherSource).onEngaged(ctx)...)
		}
		return out
	}
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
