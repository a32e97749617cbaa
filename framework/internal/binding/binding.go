// Package binding keeps the sources of a controller of many clusters
// bound to each engaged cluster other than the manager's own: it hears the
// manager's cluster.Set (a Set is its Listener and HealthListener), binds
// the controller's sources to a cluster's cache when it is engaged, hands
// the cluster's keys to the workers (its flow of the queue) once their
// informers synced and while the cluster is healthy, and at
// disengagement drops its keys, cancels its reconciles in flight and
// removes its listeners. The framework hands in how to bind the sources
// (a Bind function) and the queue's flows; the manager's own cluster is
// bound by the framework's builder, never here.
package binding

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/reconcile"
)

// Source is one of a controller's sources bound to one cluster's cache.
type Source interface {
	fmt.Stringer
	// Start registers the source's listener; its events then flow into
	// the controller's queue.
	Start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error)
	// WaitForSync waits until the source's informer synced or ctx ends.
	WaitForSync(ctx context.Context) error
	// RemoveListener removes a listener Start registered.
	RemoveListener(reg cache.ResourceEventHandlerRegistration) error
}

// Binding is a controller's sources bound to the cache of one engaged
// cluster.
type Binding struct {
	Cluster *cluster.Cluster
	Sources []Source
	// Reader reads the primary kind in the cluster: an
	// informers.Reader[T] for the controller's T.
	Reader any

	// regs are the sources' listener registrations, once started.
	regs []cache.ResourceEventHandlerRegistration
	// ctx is the context the sources were started on, which stop
	// cancels.
	ctx  context.Context
	stop context.CancelFunc
	// synced is set once the sources' informers synced, unhealthy while
	// the cluster is unhealthy; the Set's mu guards both. The cluster's
	// flow runs when synced and not unhealthy.
	synced, unhealthy bool

	mu sync.Mutex
	// running holds the cancel functions of the cluster's reconciles in
	// flight; idle is closed when the last of them returns; gone is set
	// once the cluster was disengaged. mu guards the three.
	running map[*context.CancelFunc]struct{}
	idle    chan struct{}
	gone    bool
}

// track runs cancel, the cancellation of one of the cluster's reconciles,
// when the cluster is disengaged (at once if it was), until untrack.
func (b *Binding) track(cancel *context.CancelFunc) (untrack func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gone {
		(*cancel)()
		return func() {}
	}
	if b.running == nil {
		b.running = map[*context.CancelFunc]struct{}{}
	}
	if len(b.running) == 0 {
		b.idle = make(chan struct{})
	}
	b.running[cancel] = struct{}{}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.running[cancel]; ok {
			delete(b.running, cancel)
			if len(b.running) == 0 {
				close(b.idle)
			}
		}
	}
}

// wait waits, at most timeout, until no reconcile of the cluster runs;
// it returns how many still run.
func (b *Binding) wait(timeout time.Duration) int {
	b.mu.Lock()
	idle := b.idle
	n := len(b.running)
	b.mu.Unlock()
	if n == 0 {
		return 0
	}
	t := time.NewTimer(max(timeout, 0))
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.running)
}

// cancelRunning cancels the cluster's reconciles in flight, and those that
// begin later.
func (b *Binding) cancelRunning() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = true
	for cancel := range b.running {
		(*cancel)()
	}
}

// Flows is what a Set needs of the controller's queue: a flow per
// cluster, named by the cluster (workqueue.Options.Flow), and Add for
// the requests of cluster.Scope.OnEngaged.
type Flows interface {
	Add(req reconcile.Request)
	PauseFlow(flow string)
	ResumeFlow(flow string)
	DropFlow(flow string) int
}

// Bind binds a controller's sources to an engaged cluster.
type Bind func(*cluster.Cluster) (*Binding, error)

// Set is one controller's bindings, by cluster name. Its methods are safe
// for concurrent use.
type Set struct {
	name      string
	reg       *Registry
	bind      Bind
	flows     Flows
	log       logr.Logger
	onEngaged func(context.Context, *cluster.Cluster) []reconcile.Request
	// healthyAgain is set by OnHealthyAgain.
	healthyAgain bool

	mu sync.Mutex
	// runCtx is Start's context; mu guards it, bindings, pending
	// (clusters engaged before Start, bound then) and dropped (the
	// clusters whose dropped keys were logged since they were last bound).
	runCtx   context.Context
	bindings map[string]*Binding
	pending  map[string]*cluster.Cluster
	dropped  map[string]bool
	// quiesced are the clusters whose keys Registry.Quiesce holds; mu
	// guards it.
	quiesced map[string]bool
}

var (
	_ cluster.Listener       = (*Set)(nil)
	_ cluster.HealthListener = (*Set)(nil)
)

// New returns the Set of the controller named name, which binds clusters
// with bind and runs their flows of flows; it logs to log. onEngaged, when
// not nil, is the controller's cluster.Scope.OnEngaged, whose requests are
// added once a cluster's informers synced. reg, when not nil, registers
// the Set (see Registry).
func New(name string, bind Bind, flows Flows, log logr.Logger, onEngaged func(context.Context, *cluster.Cluster) []reconcile.Request, reg *Registry) *Set {
	s := &Set{name: name, reg: reg, bind: bind, flows: flows, log: log, onEngaged: onEngaged, bindings: map[string]*Binding{}, pending: map[string]*cluster.Cluster{}, dropped: map[string]bool{}, quiesced: map[string]bool{}}
	reg.add(s)
	return s
}

// OnHealthyAgain makes s call its onEngaged again each time a cluster
// whose informers synced turns healthy after being unhealthy, and returns
// s: for requests that wake what waits for the cluster to be usable
// (framework.InOtherClusters). Call it before the Set hears of clusters.
func (s *Set) OnHealthyAgain() *Set {
	s.healthyAgain = true
	return s
}

// Start binds the clusters engaged before it, and those engaged later,
// on ctx: the controller's workers run.
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runCtx = ctx
	for name, cl := range s.pending {
		delete(s.pending, name)
		s.attachLocked(cl)
	}
}

// HoldLocal holds the keys of the manager's own cluster (flow "") until
// lead is closed (this process leads) or ctx ends: with clusters spread
// over a ring, a controller of every cluster runs in every member, and the
// leader alone reconciles the manager's own cluster. Call it before the
// controller's workers start. A nil lead, or a nil s, holds nothing.
func (s *Set) HoldLocal(ctx context.Context, lead <-chan struct{}) {
	if s == nil || lead == nil {
		return
	}
	s.flows.PauseFlow("")
	go func() {
		select {
		case <-lead:
			s.flows.ResumeFlow("")
		case <-ctx.Done():
		}
	}()
}

// Get returns the binding of the cluster named name, nil when the
// controller does not watch it (any more) or s is nil.
func (s *Set) Get(name string) *Binding {
	if s == nil {
		return nil // a controller of the manager's own cluster only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bindings[name]
}

// Names returns the names of the clusters bound, sorted; nil when s is
// nil (a controller of the manager's own cluster only).
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Collect(maps.Keys(s.bindings))
	slices.Sort(names)
	return names
}

// Context returns the context of a reconcile of a key of the cluster
// named name: ctx with the cluster (cluster.From), cancelled when the
// cluster is disengaged; done releases it. ok is false when the
// controller does not watch the cluster (any more): its key is dropped,
// which is logged once per cluster until the cluster is bound again.
func (s *Set) Context(ctx context.Context, name string) (rctx context.Context, done func(), ok bool) {
	b := s.Get(name)
	if b == nil {
		s.noteDropped(name)
		return ctx, func() {}, false
	}
	var cancel context.CancelFunc
	rctx, release := s.reg.fence(cluster.NewContext(ctx, b.Cluster), name)
	rctx, cancel = context.WithCancel(rctx)
	untrack := b.track(&cancel)
	return rctx, func() { untrack(); cancel(); release() }, true
}

// setQuiesced holds or releases the keys of the cluster named name (see
// Registry.Quiesce).
func (s *Set) setQuiesced(name string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.quiesced[name] = true
	} else {
		delete(s.quiesced, name)
	}
	if b := s.bindings[name]; b != nil {
		s.runFlowLocked(b)
	} else if on {
		s.flows.PauseFlow(name)
	}
}

// synced reports whether the controller's sources are bound to the
// cluster named name and their informers synced.
func (s *Set) synced(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bindings[name]
	return b != nil && b.synced
}

// noteDropped logs, once per cluster until it is bound again, that a key
// of the cluster named name was dropped.
func (s *Set) noteDropped(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	first := !s.dropped[name]
	s.dropped[name] = true
	s.mu.Unlock()
	if first {
		s.log.Info("dropped a key of a cluster the controller does not watch (not engaged, or disengaged); its later keys are dropped too, unlogged", "cluster", name)
	}
}

// Unhealthy holds cl's keys: they stay queued, deduplicated, until
// Healthy.
func (s *Set) Unhealthy(cl *cluster.Cluster) { s.setHealthy(cl, false) }

// Healthy hands cl's keys out again, once its informers synced; with
// OnHealthyAgain, it queues onEngaged's requests too.
func (s *Set) Healthy(cl *cluster.Cluster) { s.setHealthy(cl, true) }

// setHealthy records whether cl is healthy and pauses or resumes its flow.
func (s *Set) setHealthy(cl *cluster.Cluster, healthy bool) {
	s.mu.Lock()
	b := s.bindings[cl.Name()]
	if b == nil || b.Cluster != cl {
		s.mu.Unlock()
		return
	}
	again := s.healthyAgain && healthy && b.unhealthy && b.synced
	b.unhealthy = !healthy
	s.runFlowLocked(b)
	s.mu.Unlock()
	if again {
		s.queueEngaged(b)
	}
}

// runFlowLocked resumes b's flow when its informers synced and its
// cluster is healthy, and pauses it otherwise. s.mu must be held.
func (s *Set) runFlowLocked(b *Binding) {
	if b.synced && !b.unhealthy && !s.quiesced[b.Cluster.Name()] {
		s.flows.ResumeFlow(b.Cluster.Name())
	} else {
		s.flows.PauseFlow(b.Cluster.Name())
	}
}

// Engaged binds the controller's sources to cl, or records cl for Start
// when the controller has not started. The manager's own cluster is left
// to the builder.
func (s *Set) Engaged(cl *cluster.Cluster) {
	if cl.Name() == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runCtx == nil {
		s.pending[cl.Name()] = cl
		return
	}
	s.attachLocked(cl)
}

// Disengaged drops cl's keys from the queue, cancels its reconciles in
// flight and removes the listeners of its sources; its informers stop
// with its cache.
func (s *Set) Disengaged(cl *cluster.Cluster) {
	s.mu.Lock()
	if s.pending[cl.Name()] == cl {
		delete(s.pending, cl.Name())
	}
	b := s.bindings[cl.Name()]
	if b == nil || b.Cluster != cl {
		s.mu.Unlock()
		return
	}
	delete(s.bindings, cl.Name())
	delete(s.quiesced, cl.Name())
	s.mu.Unlock()
	s.flows.PauseFlow(cl.Name())
	dropped := s.flows.DropFlow(cl.Name())
	b.cancelRunning()
	b.stop()
	for i, reg := range b.regs {
		_ = b.Sources[i].RemoveListener(reg)
	}
	s.log.Info("stopped watching a disengaged cluster", "cluster", cl.Name(), "dropped", dropped)
}

// attachLocked binds the sources to cl and starts them; cl's flow is
// paused until their informers have synced. s.mu must be held and the
// Set started.
func (s *Set) attachLocked(cl *cluster.Cluster) {
	name := cl.Name()
	s.flows.PauseFlow(name)
	b, err := s.bind(cl)
	if err != nil {
		s.log.Error(err, "cannot watch cluster", "cluster", name)
		return
	}
	ctx, cancel := context.WithCancel(cluster.NewContext(s.runCtx, cl))
	stopAfter := context.AfterFunc(cl.Context(), cancel)
	b.ctx, b.stop = ctx, func() { stopAfter(); cancel() }
	started := b.Sources[:0]
	for _, src := range b.Sources {
		reg, err := src.Start(ctx)
		if err != nil {
			s.log.Error(err, "cannot watch cluster", "cluster", name, "source", src.String())
			continue
		}
		started, b.regs = append(started, src), append(b.regs, reg)
	}
	b.Sources = started
	s.bindings[name] = b
	delete(s.dropped, name)
	go s.waitForSync(b)
}

// waitForSync runs b's flow once its sources' informers synced.
func (s *Set) waitForSync(b *Binding) {
	name := b.Cluster.Name()
	for _, src := range b.Sources {
		if err := src.WaitForSync(b.ctx); err != nil {
			if b.ctx.Err() == nil {
				s.log.Error(err, "cluster's informers did not sync; its keys wait", "cluster", name)
			}
			return
		}
	}
	s.mu.Lock()
	bound := s.bindings[name] == b
	if bound {
		b.synced = true
		s.runFlowLocked(b)
	}
	s.mu.Unlock()
	s.reg.notify()
	if bound {
		s.queueEngaged(b)
	}
	s.log.V(1).Info("watching cluster", "cluster", name)
}

// queueEngaged queues the requests of onEngaged for b's cluster.
func (s *Set) queueEngaged(b *Binding) {
	if s.onEngaged == nil {
		return
	}
	for _, req := range s.onEngaged(b.ctx, b.Cluster) {
		if req.Cluster == "" {
			req.Cluster = b.Cluster.Name()
		}
		s.flows.Add(req)
	}
}

// ForgetOnDrop is flows whose DropFlow calls forget with the flow first: a
// controller of every cluster forgets a disengaged cluster's keys'
// reconcile history with its queued keys.
func ForgetOnDrop(flows Flows, forget func(flow string)) Flows {
	return forgetting{flows, forget}
}

type forgetting struct {
	Flows
	forget func(string)
}

func (f forgetting) DropFlow(flow string) int {
	f.forget(flow)
	return f.Flows.DropFlow(flow)
}

// InOwnCluster is flows whose Add queues a request without its cluster:
// what the InOtherClusters sources of a controller of the manager's own
// cluster map an event to is in that cluster.
func InOwnCluster(flows Flows) Flows { return ownCluster{flows} }

type ownCluster struct{ Flows }

func (f ownCluster) Add(req reconcile.Request) {
	f.Flows.Add(reconcile.Request{Namespace: req.Namespace, Name: req.Name})
}
