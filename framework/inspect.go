package framework

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
	"github.com/converge-dev/converge/workqueue"
)

// The types below are the JSON the manager's debug endpoint serves (see
// MetricsOptions.DisableDebug). They carry names, namespaces, states, times
// and error texts: never an object's contents.

// DebugState is the answer of /debug/converge/api/state: the whole manager
// at a glance.
type DebugState struct {
	Time   time.Time    `json:"time"`
	Leader LeaderStatus `json:"leader"`
	// Ring is this member's view of its sharding ring; nil without one.
	Ring        *sharding.Status   `json:"ring,omitempty"`
	Controllers []ControllerStatus `json:"controllers"`
	Informers   []InformerStatus   `json:"informers"`
	// Webhooks are the paths of the admission and conversion webhooks served.
	Webhooks []string `json:"webhooks"`
}

// LeaderStatus is this process's part in leader election.
type LeaderStatus struct {
	// Election is true when leader election is on; Lease names its Lease
	// (namespace/name) and Identity this process.
	Election bool   `json:"election"`
	Lease    string `json:"lease,omitempty"`
	Identity string `json:"identity,omitempty"`
	// Leading is true once this process runs the controllers that need
	// leadership (at once when election is off and the caches synced).
	Leading bool `json:"leading"`
}

// Kind names an API kind in the JSON.
type Kind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func kindOf(gvk schema.GroupVersionKind) Kind {
	return Kind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}

func kindGVK(k Kind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// String spells k as "apps/v1 Deployment" ("v1 ConfigMap" for the core group).
func (k Kind) String() string {
	return schema.GroupVersion{Group: k.Group, Version: k.Version}.String() + " " + k.Kind
}

// ControllerStatus is one controller: its state, queue, workers and recent
// activity.
type ControllerStatus struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// State is "pending" (the manager has not started it: not started yet,
	// or this process is not the leader), "syncing" (waiting for its
	// informers), "running" or "stopped".
	State    string          `json:"state"`
	Workers  int             `json:"workers"`
	Queue    QueueStatus     `json:"queue"`
	InFlight []InFlightKey   `json:"inFlight"`
	Totals   ReconcileTotals `json:"totals"`
	// Series is the last five minutes in five-second buckets, oldest first.
	Series []SeriesPoint `json:"series"`
	// HistoryKeys is how many keys the controller keeps a history of now.
	HistoryKeys int `json:"historyKeys"`
}

// QueueStatus is a controller's queue by priority class.
type QueueStatus struct {
	Normal QueueClass `json:"normal"`
	Replay QueueClass `json:"replay"`
	// Delayed counts keys waiting for a retry's backoff or a RequeueAfter.
	Delayed int `json:"delayed"`
}

// QueueClass is one priority class of a queue.
type QueueClass struct {
	Depth int `json:"depth"`
	// OldestSeconds is how long the first key of the class has waited.
	OldestSeconds float64 `json:"oldestSeconds"`
}

// InFlightKey is a key a worker holds now.
type InFlightKey struct {
	Namespace      string    `json:"namespace"`
	Name           string    `json:"name"`
	Worker         int       `json:"worker"`
	Started        time.Time `json:"started"`
	RunningSeconds float64   `json:"runningSeconds"`
}

// ReconcileTotals counts a controller's reconciles since it was built.
type ReconcileTotals struct {
	Reconciles uint64 `json:"reconciles"`
	Errors     uint64 `json:"errors"`
}

// SeriesPoint is a controller's activity in one five-second bucket.
type SeriesPoint struct {
	Start      time.Time `json:"start"`
	Reconciles int       `json:"reconciles"`
	Errors     int       `json:"errors"`
	// MeanSeconds is the mean reconcile duration, 0 without reconciles.
	MeanSeconds float64 `json:"meanSeconds"`
}

// InformerStatus is one informer of the shared cache.
type InformerStatus struct {
	Description string `json:"description"`
	Kind        Kind   `json:"kind"`
	Objects     int    `json:"objects"`
	Relists     int64  `json:"relists"`
	Synced      bool   `json:"synced"`
	// Error says why it has not synced, or why its last list or watch
	// failed; empty while healthy.
	Error string `json:"error,omitempty"`
}

// KeyStatus is where one key stands in one controller.
type KeyStatus struct {
	Controller string `json:"controller"`
	Kind       Kind   `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// ControllerState is the controller's State.
	ControllerState string `json:"controllerState"`
	// Cached is true when the controller's informer holds the object.
	Cached bool `json:"cached"`
	// Scope is ScopeNamespaced or ScopeCluster, the scope of Kind, for an
	// object not cached; empty when it could not be told or the object is
	// cached.
	Scope string `json:"scope,omitempty"`
	// Informer is the state of the controller's informer of its kind.
	Informer InformerStatus `json:"informer"`

	// Queued is true while the key waits for a worker, at Priority
	// ("normal" or "replay") since QueuedSince, for Reason.
	Queued      bool       `json:"queued"`
	Priority    string     `json:"priority,omitempty"`
	QueuedSince *time.Time `json:"queuedSince,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	// Delayed is true while the key waits for a retry's backoff or a
	// RequeueAfter to end, at NextAttempt, for NextReason ("retry" or
	// "requeue"); it is queued once that time comes.
	Delayed     bool       `json:"delayed"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	NextReason  string     `json:"nextReason,omitempty"`
	// Failures counts the failed reconciles since the last success.
	Failures int `json:"failures"`
	// InFlight is set while a worker holds the key.
	InFlight *InFlightKey `json:"inFlight,omitempty"`
	// History is the key's last reconciles, newest first.
	History []ReconcileRecord `json:"history"`
	// Shard is where the object falls in the sharding ring, for a sharded
	// controller (ControllerOptions.Sharded); nil otherwise.
	Shard *ShardStatus `json:"shard,omitempty"`
}

// Scopes of KeyStatus.Scope.
const (
	ScopeNamespaced = "namespaced"
	ScopeCluster    = "cluster"
)

// ShardStatus is where a key's object falls in a sharded controller's
// ring, as this member sees it.
type ShardStatus struct {
	// Bucket is the object's bucket, of Buckets; -1 when it cannot be told:
	// by UID, for an object this member has not cached.
	Bucket  int              `json:"bucket"`
	Buckets sharding.Buckets `json:"buckets"`
	// State is this member's hold of Bucket: "serving" (its keys are
	// reconciled here), "syncing" (claimed, still listing: its keys wait),
	// "draining" (being handed over: its keys are not dispatched here), or
	// empty when this member does not hold it.
	State string `json:"state,omitempty"`
	// Holder is the member whose Lease holds Bucket, when another live
	// member does.
	Holder string `json:"holder,omitempty"`
	// Serving are the buckets this member serves, when Bucket is -1.
	Serving []int `json:"serving,omitempty"`
}

// ReconcileRecord is one finished reconcile.
type ReconcileRecord struct {
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"durationSeconds"`
	Worker          int       `json:"worker"`
	// Reason is why it ran: change, replay, retry or requeue.
	Reason string `json:"reason"`
	// Result is success, requeue_after, error, terminal or panic.
	Result              string  `json:"result"`
	Error               string  `json:"error,omitempty"`
	RequeueAfterSeconds float64 `json:"requeueAfterSeconds,omitempty"`
	// Failures counts the consecutive failures this one ends (0 for a success).
	Failures int `json:"failures,omitempty"`
	// Blocked is why the reconcile noted its object is not converged
	// (NoteBlocked); nil when it noted nothing.
	Blocked *Blocker `json:"blocked,omitempty"`
}

// QueuePage is one page of a controller's queued keys, in the order the
// workers take them.
type QueuePage struct {
	Controller string      `json:"controller"`
	Offset     int         `json:"offset"`
	Limit      int         `json:"limit"`
	Total      int         `json:"total"`
	Keys       []QueuedKey `json:"keys"`
}

// QueuedKey is a key waiting in a queue.
type QueuedKey struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Priority  string    `json:"priority"`
	Since     time.Time `json:"since"`
}

// ObjectStatus is the answer of /debug/converge/api/object: one object, in
// every controller of its kind.
type ObjectStatus struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Controllers holds the object's state in each controller whose kind
	// matches; empty when no controller reconciles the kind.
	Controllers []KeyStatus `json:"controllers"`
	// Informers are the informers of the kind, for an object no controller
	// has seen.
	Informers []InformerStatus `json:"informers"`
	// Kinds are the kinds the manager's controllers reconcile, when none
	// reconciles Kind: to say what Kind may have meant.
	Kinds []Kind `json:"kinds,omitempty"`
	// WatchedBy are, when no controller reconciles Kind, the controllers
	// that watch it (Owns, Watches, a declarative controller's children),
	// each with the kind it reconciles: an object of Kind is then a child,
	// whose parent is the one to explain.
	WatchedBy []Watcher `json:"watchedBy,omitempty"`
}

// Watcher is a controller watching a kind it does not reconcile.
type Watcher struct {
	Controller string `json:"controller"`
	// Kind is the kind the controller reconciles.
	Kind Kind `json:"kind"`
}

// inspectable is what the debug endpoint reads of a controller.
type inspectable interface {
	Name() string
	gvk() schema.GroupVersionKind
	// watches returns the kinds of the controller's sources but its own.
	watches() []schema.GroupVersionKind
	status(now time.Time) ControllerStatus
	keyStatus(req reconcile.Request, now time.Time) KeyStatus
	queuePage(offset, limit int) QueuePage
	notConverged(offset, limit int, now time.Time) NotConvergedPage
}

var _ inspectable = (*Controller)(nil)

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

func (c *Controller) gvk() schema.GroupVersionKind { return c.kind }

func (c *Controller) watches() []schema.GroupVersionKind { return c.watched }

func (c *Controller) status(now time.Time) ControllerStatus {
	qs := c.queue.Stats()
	s := ControllerStatus{
		Name:    c.name,
		Kind:    kindOf(c.kind),
		State:   controllerPhase(c.phase.Load()).String(),
		Workers: c.opts.Workers,
		Queue: QueueStatus{
			Normal:  queueClass(qs.Normal, now),
			Replay:  queueClass(qs.Replay, now),
			Delayed: qs.Delayed,
		},
		InFlight:    c.inFlight(now),
		HistoryKeys: c.history.keys(),
	}
	points, total, errs := c.history.recent(now)
	s.Totals = ReconcileTotals{Reconciles: total, Errors: errs}
	s.Series = make([]SeriesPoint, len(points))
	for i, p := range points {
		sp := SeriesPoint{Start: time.Unix(0, p.bucket*int64(seriesBucket)).UTC(), Reconciles: p.n, Errors: p.errors}
		if p.n > 0 {
			sp.MeanSeconds = (p.took / time.Duration(p.n)).Seconds()
		}
		s.Series[i] = sp
	}
	return s
}

func queueClass(cs workqueue.ClassStats, now time.Time) QueueClass {
	q := QueueClass{Depth: cs.Depth}
	if cs.Depth > 0 {
		q.OldestSeconds = max(now.Sub(cs.Oldest).Seconds(), 0)
	}
	return q
}

// inFlight lists the keys workers hold, longest running first.
func (c *Controller) inFlight(now time.Time) []InFlightKey {
	c.mu.Lock()
	out := make([]InFlightKey, 0, len(c.inflight))
	for _, r := range c.inflight {
		out = append(out, inFlightKey(r, now))
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b InFlightKey) int { return a.Started.Compare(b.Started) })
	return out
}

func inFlightKey(r inflightReconcile, now time.Time) InFlightKey {
	return InFlightKey{Namespace: r.req.Namespace, Name: r.req.Name, Worker: r.worker, Started: r.begun, RunningSeconds: now.Sub(r.begun).Seconds()}
}

func (c *Controller) keyStatus(req reconcile.Request, now time.Time) KeyStatus {
	s := KeyStatus{
		Controller:      c.name,
		Kind:            kindOf(c.kind),
		Namespace:       req.Namespace,
		Name:            req.Name,
		ControllerState: controllerPhase(c.phase.Load()).String(),
		History:         []ReconcileRecord{},
	}
	if c.primary != nil {
		s.Cached = c.primary.Contains(types.NamespacedName(req))
		s.Informer = InformerStatus{Description: c.primary.String(), Kind: kindOf(c.kind), Objects: c.primary.Len(), Synced: c.primary.HasSynced(), Relists: c.primary.Relists()}
		if err := c.primary.Health(); err != nil {
			s.Informer.Error = err.Error()
		}
	}
	if !s.Cached && c.mgr != nil {
		if m, err := c.mgr.RESTMapper().RESTMapping(c.kind.GroupKind(), c.kind.Version); err == nil {
			s.Scope = ScopeCluster
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				s.Scope = ScopeNamespaced
			}
		}
	}
	if c.shard != nil {
		s.Shard = c.shard.status(req)
	}
	ks := c.queue.Inspect(req)
	if ks.Queued {
		since := ks.Since
		s.Queued, s.QueuedSince, s.Reason, s.Priority = true, &since, string(ks.Reason), "normal"
		if ks.Replay {
			s.Priority = "replay"
		}
	}
	if ks.Delayed {
		due := ks.Due
		s.Delayed, s.NextAttempt, s.NextReason = true, &due, string(ks.DelayReason)
	}
	s.Failures = ks.Retries
	c.mu.Lock()
	for _, r := range c.inflight {
		if r.req == req {
			k := inFlightKey(r, now)
			s.InFlight = &k
		}
	}
	c.mu.Unlock()
	for _, r := range c.history.of(req) {
		s.History = append(s.History, ReconcileRecord{
			Started:             r.start,
			DurationSeconds:     r.took.Seconds(),
			Worker:              r.worker,
			Reason:              string(r.reason),
			Result:              r.result,
			Error:               r.err,
			RequeueAfterSeconds: r.requeueAfter.Seconds(),
			Failures:            r.retries,
			Blocked:             r.blocked,
		})
	}
	return s
}

func (c *Controller) queuePage(offset, limit int) QueuePage {
	qs := c.queue.Stats()
	p := QueuePage{Controller: c.name, Offset: offset, Limit: limit, Total: qs.Normal.Depth + qs.Replay.Depth, Keys: []QueuedKey{}}
	for _, k := range c.queue.Keys(offset, limit) {
		prio := "normal"
		if k.Replay {
			prio = "replay"
		}
		p.Keys = append(p.Keys, QueuedKey{Namespace: k.Key.Namespace, Name: k.Key.Name, Priority: prio, Since: k.Since})
	}
	return p
}

// matchesKind reports whether the user's spelling of a kind names gvk:
// its Kind ("Deployment", any case), "Kind.group" ("deployment.apps") or
// "group/version Kind" as Kind.String spells it.
func matchesKind(spelled string, gvk schema.GroupVersionKind) bool {
	spelled = strings.TrimSpace(spelled)
	if strings.EqualFold(spelled, gvk.Kind) || strings.EqualFold(spelled, kindOf(gvk).String()) {
		return true
	}
	kind, group, ok := strings.Cut(spelled, ".")
	return ok && strings.EqualFold(kind, gvk.Kind) && strings.EqualFold(group, gvk.Group)
}

// informerStatuses converts the cache's stats.
func informerStatuses(stats []informers.InformerStats) []InformerStatus {
	out := make([]InformerStatus, 0, len(stats))
	for _, st := range stats {
		is := InformerStatus{Description: st.Description, Kind: kindOf(st.Kind), Objects: st.Objects, Relists: st.Relists, Synced: st.Synced}
		if st.Err != nil {
			is.Error = st.Err.Error()
		}
		out = append(out, is)
	}
	return out
}
