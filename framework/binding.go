package framework

import (
	"context"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// clusterBinding is a controller's sources bound to the cache of one
// engaged cluster other than the manager's own (whose binding is the
// controller's sources, made by the builder).
type clusterBinding struct {
	cluster *cluster.Cluster
	sources []boundSource
	// reader reads the primary kind in the cluster: an
	// informers.Reader[T] for the builder's T.
	reader any
	// regs are the sources' listener registrations, once started.
	regs []cache.ResourceEventHandlerRegistration
	// stop cancels the context the sources were started on.
	stop context.CancelFunc
	// synced is set once the sources' informers synced, unhealthy while
	// the cluster is unhealthy; the controller's bindMu guards both. The
	// cluster's flow runs when synced and not unhealthy.
	synced, unhealthy bool

	mu sync.Mutex
	// running holds the cancel functions of the cluster's reconciles in
	// flight; gone is set once the cluster was disengaged. mu guards both.
	running map[*context.CancelFunc]struct{}
	gone    bool
}

// track runs cancel, the cancellation of one of the cluster's reconciles,
// when the cluster is disengaged (at once if it was), until untrack.
func (b *clusterBinding) track(cancel *context.CancelFunc) (untrack func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gone {
		(*cancel)()
		return func() {}
	}
	if b.running == nil {
		b.running = map[*context.CancelFunc]struct{}{}
	}
	b.running[cancel] = struct{}{}
	return func() {
		b.mu.Lock()
		delete(b.running, cancel)
		b.mu.Unlock()
	}
}

// cancelRunning cancels the cluster's reconciles in flight, and those that
// begin later.
func (b *clusterBinding) cancelRunning() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = true
	for cancel := range b.running {
		(*cancel)()
	}
}

// flowQueue is what a controller of many clusters needs of its queue
// besides queue: a flow per cluster (workqueue.Options.Flow).
type flowQueue interface {
	PauseFlow(flow string)
	ResumeFlow(flow string)
	DropFlow(flow string) int
}

// clusters is a controller's listener of the manager's Set: it binds the
// controller's sources to each engaged cluster in its scope, and unbinds
// them at disengagement. It is a type of its own so that Controller does
// not export the listener's methods.
type clusters struct{ c *Controller }

var (
	_ cluster.Listener       = clusters{}
	_ cluster.HealthListener = clusters{}
)

// Unhealthy holds cl's keys: they stay queued, deduplicated, until
// Healthy.
func (l clusters) Unhealthy(cl *cluster.Cluster) { l.c.setHealthy(cl, false) }

// Healthy hands cl's keys out again, once its informers synced.
func (l clusters) Healthy(cl *cluster.Cluster) { l.c.setHealthy(cl, true) }

// setHealthy records whether cl is healthy and pauses or resumes its flow.
func (c *Controller) setHealthy(cl *cluster.Cluster, healthy bool) {
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	b := c.bindings[cl.Name()]
	if b == nil || b.cluster != cl {
		return
	}
	b.unhealthy = !healthy
	c.runFlowLocked(b)
}

// runFlowLocked resumes b's flow when its informers synced and its
// cluster is healthy, and pauses it otherwise. c.bindMu must be held.
func (c *Controller) runFlowLocked(b *clusterBinding) {
	if b.synced && !b.unhealthy {
		c.flows.ResumeFlow(b.cluster.Name())
	} else {
		c.flows.PauseFlow(b.cluster.Name())
	}
}

// Engaged binds the controller's sources to cl, or records cl for Start
// when the controller has not started.
func (l clusters) Engaged(cl *cluster.Cluster) {
	c := l.c
	if cl.Name() == "" {
		return // the builder bound the manager's own cluster
	}
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	if c.runCtx == nil {
		c.pending[cl.Name()] = cl
		return
	}
	c.attachLocked(cl)
}

// Disengaged drops cl's keys from the queue and removes the listeners of
// its sources; its informers stop with its cache.
func (l clusters) Disengaged(cl *cluster.Cluster) {
	c := l.c
	c.bindMu.Lock()
	if c.pending[cl.Name()] == cl {
		delete(c.pending, cl.Name())
	}
	b := c.bindings[cl.Name()]
	if b == nil || b.cluster != cl {
		c.bindMu.Unlock()
		return
	}
	delete(c.bindings, cl.Name())
	c.bindMu.Unlock()
	c.flows.PauseFlow(cl.Name())
	dropped := c.flows.DropFlow(cl.Name())
	b.cancelRunning()
	b.stop()
	for i, reg := range b.regs {
		_ = b.sources[i].informer().RemoveListener(reg)
	}
	c.log.Info("stopped watching a disengaged cluster", "cluster", cl.Name(), "dropped", dropped)
}

// attachLocked binds the sources to cl and starts them; cl's flow is
// paused until their informers have synced. c.bindMu must be held and the
// controller started.
func (c *Controller) attachLocked(cl *cluster.Cluster) {
	name := cl.Name()
	c.flows.PauseFlow(name)
	b, err := c.bindCluster(cl)
	if err != nil {
		c.log.Error(err, "cannot watch cluster", "cluster", name)
		return
	}
	ctx, cancel := context.WithCancel(cluster.NewContext(c.runCtx, cl))
	stopAfter := context.AfterFunc(cl.Context(), cancel)
	b.stop = func() { stopAfter(); cancel() }
	for _, s := range b.sources {
		reg, err := s.start(ctx)
		if err != nil {
			c.log.Error(err, "cannot watch cluster", "cluster", name, "source", s.String())
			continue
		}
		b.regs = append(b.regs, reg)
	}
	b.sources = b.sources[:len(b.regs)]
	c.bindings[name] = b
	go func() {
		for _, s := range b.sources {
			if err := s.informer().WaitForSync(ctx); err != nil {
				if ctx.Err() == nil {
					c.log.Error(err, "cluster's informers did not sync; its keys wait", "cluster", name)
				}
				return
			}
		}
		c.bindMu.Lock()
		if c.bindings[name] == b {
			b.synced = true
			c.runFlowLocked(b)
		}
		c.bindMu.Unlock()
		c.log.V(1).Info("watching cluster", "cluster", name)
	}()
}

// startClusters binds the clusters engaged before Start, once the
// controller runs on ctx.
func (c *Controller) startClusters(ctx context.Context) {
	if c.bindCluster == nil {
		return
	}
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	c.runCtx = ctx
	for name, cl := range c.pending {
		delete(c.pending, name)
		c.attachLocked(cl)
	}
}

// binding returns the binding of the cluster named name, nil when the
// controller does not watch it (any more).
func (c *Controller) binding(name string) *clusterBinding {
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	return c.bindings[name]
}

// bindRemote returns the function that binds the sources of controller c
// (its primary source and srcs) to an engaged cluster; tombstones, when
// not nil, keeps the last state of the deleted objects of each cluster.
func bindRemote[T object.Object](c *Controller, primary *kindSource[T], srcs []Source, tombstones func(cluster string) func(T)) func(*cluster.Cluster) (*clusterBinding, error) {
	return func(cl *cluster.Cluster) (*clusterBinding, error) {
		target := &watchTarget{mgr: c.mgr, cluster: cl, name: c.name, owner: c.kind, queue: c.queue, log: c.log.WithValues("cluster", cl.Name())}
		pb, err := primary.bindKind(target)
		if err != nil {
			return nil, err
		}
		if tombstones != nil {
			pb.keepTombstones(tombstones(cl.Name()))
		}
		b := &clusterBinding{cluster: cl, sources: []boundSource{pb}, reader: informers.Reader[T](pb.inf)}
		for _, src := range srcs {
			s, err := src.bind(target)
			if err != nil {
				return nil, err
			}
			b.sources = append(b.sources, s)
		}
		return b, nil
	}
}

// clusterFlow is the flow of a request: its cluster.
func clusterFlow(r reconcile.Request) string { return r.Cluster }
