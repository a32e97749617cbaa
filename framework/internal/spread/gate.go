package spread

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/sharding"
)

// Gate is the providers' Engager and the ring's ClusterUser (see the
// package documentation). A nil Gate spreads nothing: Wrap returns the
// providers as they are, and Registry returns nil.
type Gate struct {
	reg *binding.Registry
	// set, ring and describe are set once, by Wrap and Bind, before the
	// manager starts.
	set      *cluster.Set
	ring     *ring.Ring
	describe string

	// engaging serializes what engages and disengages a cluster with the
	// decision to (Engage, Disengage, Acquire, Drop), so that a cluster
	// is never engaged once its holding was dropped. Take it before mu;
	// the Set's listener calls never take it.
	engaging sync.Mutex

	mu sync.Mutex
	// wanted are the targets the providers asked for, by name; held the
	// holdings of the clusters the ring gave this member. mu guards both.
	wanted map[string]cluster.Target
	held   map[string]*holding

	// quiescing, when not nil, is called as Serve is about to quiesce a
	// cluster, g.engaging held: tests interleave there.
	quiescing func(name string)
}

// holding is the ring's hold of one cluster, from Acquire to Drop.
type holding struct {
	ctx context.Context
	// engaged is closed once the Set engaged the cluster for the holding.
	engaged chan struct{}
}

var (
	_ cluster.Engager  = (*Gate)(nil)
	_ cluster.Listener = (*Gate)(nil)
	_ ring.ClusterUser = (*Gate)(nil)
)

// New returns the Gate of a manager of sharding options opts, nil unless
// opts.Clusters.
func New(opts sharding.Options) *Gate {
	if !opts.Clusters {
		return nil
	}
	g := &Gate{wanted: map[string]cluster.Target{}, held: map[string]*holding{}}
	g.reg = binding.NewRegistry(g.holding)
	return g
}

// Registry returns the bindings the Gate hands clusters over with, nil
// for a nil Gate.
func (g *Gate) Registry() *binding.Registry {
	if g == nil {
		return nil
	}
	return g.reg
}

// Wrap returns providers that tell the Gate what they find, ps as they
// are for a nil Gate. The Gate's description is theirs.
func (g *Gate) Wrap(ps []cluster.Provider) []cluster.Provider {
	if g == nil {
		return ps
	}
	g.describe = cluster.DescribeProviders(ps)
	out := make([]cluster.Provider, len(ps))
	for i, p := range ps {
		out[i] = provider{p, g}
	}
	return out
}

// provider runs a provider with the Gate as its Engager.
type provider struct {
	p cluster.Provider
	g *Gate
}

func (p provider) Run(ctx context.Context, _ cluster.Engager) error { return p.p.Run(ctx, p.g) }

// Bind connects the Gate to the manager's Set and ring: it hears the Set's
// engagements and spreads its clusters over the ring. Call once, before
// the manager starts.
func (g *Gate) Bind(set *cluster.Set, r *ring.Ring) error {
	if g == nil {
		return nil
	}
	g.set, g.ring = set, r
	set.Subscribe(g)
	return r.SpreadClusters(g)
}

// holding is Registry.Holding: the context of the ring's holding of the
// cluster named name and its fence.
func (g *Gate) holding(name string) (context.Context, func() error) {
	return g.ring.ClusterContext(name), func() error { return g.ring.CheckCluster(name) }
}

// fenced returns t whose writes are fenced by the ring's hold of it.
func (g *Gate) fenced(t cluster.Target) cluster.Target {
	t.Fence = func() error { return g.ring.CheckCluster(t.Name) }
	return t
}

// Engage records t, refused as the Set refuses it (invalid, the manager's
// own name, a name another source engaged), and engages it when the ring
// holds it: a new version of a cluster engaged here replaces it.
func (g *Gate) Engage(t cluster.Target) error {
	t, err := cluster.Admit(t)
	if err != nil {
		return err
	}
	g.engaging.Lock()
	defer g.engaging.Unlock()
	g.mu.Lock()
	if w, ok := g.wanted[t.Name]; ok && w.Source != t.Source {
		g.mu.Unlock()
		return fmt.Errorf("cluster %q: %s names it, and %s engaged it first: %w", t.Name, t.Source, w.Source, cluster.ErrDuplicate)
	}
	_, known := g.wanted[t.Name]
	g.wanted[t.Name] = t
	held := g.held[t.Name] != nil
	g.mu.Unlock()
	if !known {
		g.ring.Poke()
	}
	if held {
		return g.set.Engage(g.fenced(t))
	}
	return nil
}

// Disengage forgets the cluster named name; one engaged here is
// disengaged at once, while the ring still holds it (a Listener's cleanup
// may write), and the ring then releases its Lease.
func (g *Gate) Disengage(name string) {
	g.engaging.Lock()
	defer g.engaging.Unlock()
	g.mu.Lock()
	_, known := g.wanted[name]
	delete(g.wanted, name)
	held := g.held[name] != nil
	g.mu.Unlock()
	if held {
		g.set.Disengage(name)
	}
	if known {
		g.ring.Poke()
	}
}

// Fail is the Set's Fail.
func (g *Gate) Fail(name, source string, err error) { g.set.Fail(name, source, err) }

// Local is the Set's Local.
func (g *Gate) Local() *cluster.Cluster { return g.set.Local() }

// Clusters returns the names of the clusters the providers want engaged,
// sorted.
func (g *Gate) Clusters() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.wanted))
}

// Describe describes the providers (cluster.DescribeProviders).
func (g *Gate) Describe() string { return g.describe }

// errNotFound fails an Acquire of a cluster the providers no longer find:
// the ring gives it up at its next look.
var errNotFound = errors.New("the providers no longer find the cluster")

// Acquire engages the cluster named name for the holding of ctx and
// returns once it is engaged and every controller of many clusters read
// it, or with ctx's error. The heap is bounded (the ring's SyncHeapRatio)
// while the controllers' informers sync, not while the engagement waits
// for the API server, and for syncgc.MaxBound at most: a sync that never
// ends (a controller that could not watch the cluster, informers that
// cannot list) must not keep GOGC lowered for the whole process.
func (g *Gate) Acquire(ctx context.Context, name string) error {
	h, err := g.engage(ctx, name)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.engaged:
	}
	defer syncgc.BoundWithin(g.ring.SyncHeapRatio, time.After(syncgc.MaxBound))()
	return g.reg.Synced(ctx, name)
}

// engage records the holding of ctx of the cluster named name, and
// engages it.
func (g *Gate) engage(ctx context.Context, name string) (*holding, error) {
	g.engaging.Lock()
	defer g.engaging.Unlock()
	g.mu.Lock()
	t, ok := g.wanted[name]
	if !ok {
		g.mu.Unlock()
		return nil, fmt.Errorf("cluster %q: %w", name, errNotFound)
	}
	h := &holding{ctx: ctx, engaged: make(chan struct{})}
	g.held[name] = h
	g.mu.Unlock()
	g.reg.Resume(name)
	if err := g.set.Engage(g.fenced(t)); err != nil {
		return nil, err
	}
	if _, err := g.set.Get(name); err == nil {
		g.markEngaged(name) // engaged already: the same version, still engaged
	}
	return h, nil
}

// Serve holds the cluster's keys in every controller when on is false,
// for the holding of ctx, unless that holding ended: a late quiesce must
// not hold the keys of the next holding (engage resumes them). On, it does
// nothing: the keys flow once the cluster's informers synced.
func (g *Gate) Serve(ctx context.Context, name string, on bool) {
	if on {
		return
	}
	g.whileHeld(ctx, name, func() {
		if g.quiescing != nil {
			g.quiescing(name)
		}
		g.reg.Quiesce(name)
	})
}

// Drain waits, at most timeout, for the cluster's reconciles in flight;
// it returns the controller of each still running.
func (g *Gate) Drain(name string, timeout time.Duration) []string {
	return g.reg.Drain(name, timeout)
}

// Drop disengages the cluster for the holding of ctx; a Drop of a holding
// that ended, once the ring claimed the cluster again, does nothing.
func (g *Gate) Drop(ctx context.Context, name string) {
	g.whileHeld(ctx, name, func() {
		g.mu.Lock()
		delete(g.held, name)
		g.mu.Unlock()
		g.set.Disengage(name)
	})
}

// whileHeld runs fn if ctx is the context of the holding of name,
// g.engaging held throughout, so that no Drop or claim of name comes
// between the check and fn.
func (g *Gate) whileHeld(ctx context.Context, name string, fn func()) {
	g.engaging.Lock()
	defer g.engaging.Unlock()
	g.mu.Lock()
	h := g.held[name]
	g.mu.Unlock()
	if h != nil && h.ctx == ctx {
		fn()
	}
}

// markEngaged closes the engaged channel of the holding of name, if any.
func (g *Gate) markEngaged(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.held[name]; h != nil {
		select {
		case <-h.engaged:
		default:
			close(h.engaged)
		}
	}
}

// Engaged hears the Set's engagements: a cluster held here is engaged.
func (g *Gate) Engaged(c *cluster.Cluster) {
	if c.Name() != "" {
		g.markEngaged(c.Name())
	}
}

// Disengaged does nothing: Drop and Disengage tell the ring.
func (g *Gate) Disengaged(*cluster.Cluster) {}
