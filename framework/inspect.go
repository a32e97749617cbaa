package framework

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// inspectable is what the debug endpoint reads of a controller; inspected
// shows it to package introspect.
type inspectable interface {
	Name() string
	gvk() schema.GroupVersionKind
	// watches returns the kinds of the controller's sources but its own.
	watches() []schema.GroupVersionKind
	status(now time.Time) introspect.ControllerStatus
	keyStatus(req reconcile.Request, now time.Time) introspect.KeyStatus
	queuePage(offset, limit int) introspect.QueuePage
	notConvergedCandidates() []introspect.Moved
}

var _ inspectable = (*Controller)(nil)

// inspected is a controller as package introspect reads it.
type inspected struct{ c inspectable }

var _ introspect.Controller = inspected{}

func (i inspected) Name() string                                 { return i.c.Name() }
func (i inspected) Kind() schema.GroupVersionKind                { return i.c.gvk() }
func (i inspected) Watches() []schema.GroupVersionKind           { return i.c.watches() }
func (i inspected) Queue(offset, limit int) introspect.QueuePage { return i.c.queuePage(offset, limit) }
func (i inspected) Unconverged() []introspect.Moved              { return i.c.notConvergedCandidates() }
func (i inspected) Key(req reconcile.Request, now time.Time) introspect.KeyStatus {
	return i.c.keyStatus(req, now)
}

func (m *Manager) addInspected(c inspectable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inspected = append(m.inspected, c)
}

func (m *Manager) inspectedControllers() []inspectable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.inspected)
}

// backlogs is what syncgc.Hold reads of the controllers this process runs
// now, or is about to: once it leads, those that need leadership and those
// whose keys of the manager's own cluster wait for it (Controller.leads).
func (m *Manager) backlogs() (out []syncgc.Controller) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, i := range m.inspected {
		c, ok := i.(*Controller)
		if !ok || (c.NeedLeaderElection() || c.leads() != nil) && !m.leading {
			continue
		}
		if phase := controllerPhase(c.phase.Load()); phase != phaseStopped {
			b := syncgc.Controller{Name: c.name, Reconciles: c.ids.Load(), Objects: c.primary.Stats().Objects, Queued: c.queue.Len()}
			if phase == phaseRunning {
				b.Running, b.Listeners = true, c.listeners // set before the phase
			}
			out = append(out, b)
		}
	}
	return out
}

func (c *Controller) gvk() schema.GroupVersionKind { return c.kind }

func (c *Controller) watches() []schema.GroupVersionKind { return c.watched }

func (c *Controller) status(now time.Time) introspect.ControllerStatus {
	s := introspect.ControllerStatus{
		Name:        c.name,
		Kind:        introspect.KindOf(c.kind),
		State:       controllerPhase(c.phase.Load()).String(),
		Workers:     c.opts.Workers,
		Queue:       c.queue.Stats(),
		InFlight:    c.inFlight(now),
		HistoryKeys: c.history.Keys(),
	}
	if f, ok := c.queue.(interface{ Flows() []workqueue.FlowStats }); ok && c.remote != nil {
		s.Flows = f.Flows()
	}
	s.Series, s.Totals = c.history.Series(now)
	return s
}

// inFlight lists the keys workers hold, longest running first.
func (c *Controller) inFlight(now time.Time) []introspect.InFlightKey {
	c.mu.Lock()
	out := make([]introspect.InFlightKey, 0, len(c.inflight))
	for _, r := range c.inflight {
		out = append(out, inFlightKey(r, now))
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b introspect.InFlightKey) int { return a.Started.Compare(b.Started) })
	return out
}

func inFlightKey(r inflightReconcile, now time.Time) introspect.InFlightKey {
	return introspect.InFlightKey{Cluster: r.req.Cluster, Namespace: r.req.Namespace, Name: r.req.Name, Worker: r.worker, Started: r.begun, RunningSeconds: now.Sub(r.begun).Seconds()}
}

func (c *Controller) keyStatus(req reconcile.Request, now time.Time) introspect.KeyStatus {
	s := introspect.KeyStatus{
		Controller:      c.name,
		Kind:            introspect.KindOf(c.kind),
		Namespace:       req.Namespace,
		Name:            req.Name,
		ControllerState: controllerPhase(c.phase.Load()).String(),
	}
	primary := c.primary
	if s.Cluster = req.Cluster; req.Cluster != "" {
		b := c.remote.Get(req.Cluster)
		if s.Unwatched, primary = b == nil, nil; b != nil {
			primary, _ = b.Reader.(primaryInformer)
			if h := b.Cluster.Health(); h.State != cluster.StateReady {
				s.ClusterHealth = new(clusterStatus(cluster.Stats{Health: h}))
			}
		}
	}
	if primary != nil {
		s.Cached = primary.Contains(types.NamespacedName{Namespace: req.Namespace, Name: req.Name})
		s.Informer = primary.Stats()
		s.Informer.Description, s.Informer.Kind = primary.String(), c.kind
	}
	if !s.Cached && req.Cluster == "" {
		s.OtherClusters = c.remote.Names()
	}
	if !s.Cached && c.mgr != nil && !s.Unwatched {
		if m, err := c.mgr.RESTMapper().RESTMapping(c.kind.GroupKind(), c.kind.Version); err == nil {
			s.Scope = introspect.ScopeCluster
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				s.Scope = introspect.ScopeNamespaced
			}
		}
	}
	if c.shard != nil {
		s.Shard = c.shard.status(req)
	}
	s.Queue = c.queue.Inspect(req)
	c.mu.Lock()
	for _, r := range c.inflight {
		if r.req == req {
			k := inFlightKey(r, now)
			s.InFlight = &k
		}
	}
	c.mu.Unlock()
	s.History = c.history.Records(req)
	return s
}

func (c *Controller) queuePage(offset, limit int) introspect.QueuePage {
	qs := c.queue.Stats()
	p := introspect.QueuePage{Controller: c.name, Offset: offset, Limit: limit, Total: qs.Normal.Depth + qs.Replay.Depth, Keys: c.queue.Keys(offset, limit)}
	if p.Keys == nil {
		p.Keys = []workqueue.QueuedKey[reconcile.Request]{}
	}
	return p
}

// notConvergedCandidates returns the keys that may not be converged,
// newest first.
func (c *Controller) notConvergedCandidates() []introspect.Moved {
	seen := map[reconcile.Request]int{}
	var out []introspect.Moved
	c.history.EachLast(func(req reconcile.Request, r *history.Record) {
		if r.Blocked == nil && r.Err == "" {
			return
		}
		seen[req] = len(out)
		out = append(out, introspect.Moved{Key: req, At: r.Start.Add(r.Took)})
	})
	c.mu.Lock()
	for _, r := range c.inflight {
		if i, ok := seen[r.req]; ok {
			out[i].At = r.begun
			continue
		}
		seen[r.req] = len(out)
		out = append(out, introspect.Moved{Key: r.req, At: r.begun})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b introspect.Moved) int {
		if n := b.At.Compare(a.At); n != 0 {
			return n
		}
		return cmp.Or(cmp.Compare(a.Key.Namespace, b.Key.Namespace), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return out
}

// primaryInformer is what the debug pages read of the informer of the kind
// a controller reconciles: an *informers.Informer[T] for the builder's T.
type primaryInformer interface {
	fmt.Stringer
	Contains(key types.NamespacedName) bool
	HasSynced() bool
	Relists() int64
	Stats() informers.InformerStats
}

// controllerPhase is where a controller is in its life.
type controllerPhase int32

const (
	phasePending controllerPhase = iota // built; the manager has not started it (not started, or not leading)
	phaseSyncing                        // started; waiting for its informers to sync
	phaseRunning                        // workers run
	phaseStopped                        // Start returned
)

func (p controllerPhase) String() string {
	switch p {
	case phaseSyncing:
		return "syncing"
	case phaseRunning:
		return "running"
	case phaseStopped:
		return "stopped"
	}
	return "pending"
}

// clusterStatus is what the debug endpoint shows of a cluster.
func clusterStatus(st cluster.Stats) introspect.ClusterStatus {
	return introspect.ClusterStatus{Name: st.Cluster, Source: st.Source, State: string(st.State), Since: st.Since, Error: st.Err, Informers: st.Informers, Objects: st.Objects, Bytes: st.Bytes}
}
