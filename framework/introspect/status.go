package introspect

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
	"github.com/converge-dev/converge/workqueue"
)

// The types below are the JSON the endpoint serves. They carry names,
// namespaces, states, times and error texts: never an object's contents.

// State is the answer of /debug/converge/api/state: the whole manager
// at a glance.
type State struct {
	Time   time.Time    `json:"time"`
	Leader LeaderStatus `json:"leader"`
	// Ring is this member's view of its sharding ring; nil without one.
	Ring        *sharding.Status          `json:"ring,omitempty"`
	Controllers []ControllerStatus        `json:"controllers"`
	Informers   []informers.InformerStats `json:"informers"`
	// Memory is the process's heap and the cache's part of it.
	Memory Memory `json:"memory"`
	// Webhooks are the paths of the admission and conversion webhooks served.
	Webhooks []string `json:"webhooks"`
	// Clusters are the clusters the manager knows of (package cluster):
	// its own, named "", first, then those its providers engaged or tried
	// to, by name.
	Clusters []ClusterStatus `json:"clusters"`
}

// ClusterStatus is one cluster: its engagement, its keys in the
// controllers' queues and its cache.
type ClusterStatus struct {
	Name string `json:"name"`
	// Source is where its target came from (a provider's description,
	// such as Secret fleet-system/edge-1).
	Source string `json:"source,omitempty"`
	// State is engaging, ready, unhealthy, failed or disengaged, since
	// Since; Error is why the last attempt or probe failed.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
	// Queued and Held are its keys waiting for a worker and held by one,
	// over the controllers.
	Queued int `json:"queued"`
	Held   int `json:"held"`
	// Informers, Objects and Bytes are its cache: informers, the objects
	// they hold, and their estimated heap bytes with the values they share.
	Informers int   `json:"informers"`
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
}

// CountKeys fills the Queued and Held of clusters from the controllers:
// the flows of a controller of many clusters (ControllerStatus.Flows),
// the whole queue of the others, which serve the manager's own cluster
// ""; and their keys in flight. When several entries share a name (a
// duplicate source), the engaged one counts them.
func CountKeys(clusters []ClusterStatus, controllers []ControllerStatus) []ClusterStatus {
	at := map[string]int{}
	for i, c := range clusters {
		if j, seen := at[c.Name]; !seen || (c.State == "ready" || c.State == "unhealthy") && clusters[j].State != "ready" && clusters[j].State != "unhealthy" {
			at[c.Name] = i
		}
	}
	add := func(name string, queued, held int) {
		if i, ok := at[name]; ok {
			clusters[i].Queued += queued
			clusters[i].Held += held
		}
	}
	for _, cs := range controllers {
		if cs.Flows == nil {
			add("", cs.Queue.Normal.Depth+cs.Queue.Replay.Depth, 0)
		}
		for _, f := range cs.Flows {
			add(f.Flow, f.Queued, 0)
		}
		for _, k := range cs.InFlight {
			add(k.Cluster, 0, 1)
		}
	}
	return clusters
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

// KindOf is gvk as the JSON spells it.
func KindOf(gvk schema.GroupVersionKind) Kind {
	return Kind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
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
	State   string          `json:"state"`
	Workers int             `json:"workers"`
	Queue   workqueue.Stats `json:"queue"`
	// Flows are the queue's flows, one per cluster, of a controller of
	// many clusters; nil for a controller of the manager's own cluster.
	Flows    []workqueue.FlowStats `json:"flows,omitempty"`
	InFlight []InFlightKey         `json:"inFlight"`
	Totals   ReconcileTotals       `json:"totals"`
	// Series is the last five minutes in five-second buckets, oldest first.
	Series []SeriesPoint `json:"series"`
	// HistoryKeys is how many keys the controller keeps a history of now.
	HistoryKeys int `json:"historyKeys"`
}

// InFlightKey is a key a worker holds now.
type InFlightKey struct {
	// Cluster is the key's cluster, "" for the manager's own.
	Cluster        string    `json:"cluster,omitempty"`
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

// KeyStatus is where one key stands in one controller.
type KeyStatus struct {
	Controller string `json:"controller"`
	Kind       Kind   `json:"kind"`
	// Cluster is the object's cluster, "" for the manager's own.
	Cluster string `json:"cluster,omitempty"`
	// Unwatched is set when the controller does not watch Cluster: it is
	// not engaged, or the controller's scope is the manager's own cluster.
	Unwatched bool `json:"unwatched,omitempty"`
	// ClusterHealth is Cluster's state when it is engaged but not ready
	// (unhealthy: its keys wait until a probe passes); nil otherwise.
	ClusterHealth *ClusterStatus `json:"clusterHealth,omitempty"`
	// OtherClusters are the clusters besides the manager's own that the
	// controller watches, for an object of the manager's own cluster that
	// its informer does not hold: it may be in one of them.
	OtherClusters []string `json:"otherClusters,omitempty"`
	Namespace     string   `json:"namespace"`
	Name          string   `json:"name"`
	// ControllerState is the controller's State.
	ControllerState string `json:"controllerState"`
	// Cached is true when the controller's informer holds the object.
	Cached bool `json:"cached"`
	// Scope is ScopeNamespaced or ScopeCluster, the scope of Kind, for an
	// object not cached; empty when it could not be told or the object is
	// cached.
	Scope string `json:"scope,omitempty"`
	// Informer is the state of the controller's informer of its kind.
	Informer informers.InformerStats `json:"informer"`

	// Queue is where the key stands in the controller's queue: queued
	// and why, or delayed for a retry's backoff or a RequeueAfter, and its
	// failures since the last success (Retries).
	Queue workqueue.KeyState `json:"queue"`
	// InFlight is set while a worker holds the key.
	InFlight *InFlightKey `json:"inFlight,omitempty"`
	// History is the key's last reconciles, newest first.
	History []ReconcileRecord `json:"history"`
	// Shard is where the object falls in the sharding ring, for a sharded
	// controller (framework.ControllerOptions.Sharded); nil otherwise.
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
	// Error and Blocked.Message end in Truncated when they were cut.
	Result              string  `json:"result"`
	Error               string  `json:"error,omitempty"`
	RequeueAfterSeconds float64 `json:"requeueAfterSeconds,omitempty"`
	// Failures counts the consecutive failures this one ends (0 for a success).
	Failures int `json:"failures,omitempty"`
	// Blocked is why the reconcile noted its object is not converged
	// (framework.NoteBlocked); nil when it noted nothing.
	Blocked *reconcile.Blocker `json:"blocked,omitempty"`
}

// Values of ReconcileRecord.Result that Explain tells apart.
const (
	resultError    = "error"
	resultTerminal = "terminal"
	resultPanic    = "panic"
)

// Truncated ends an error text or a Blocker's message that was cut to
// 512 bytes for the history.
const Truncated = " …(truncated)"

// QueuePage is one page of a controller's queued keys, in the order the
// workers take them.
type QueuePage struct {
	Controller string                                   `json:"controller"`
	Offset     int                                      `json:"offset"`
	Limit      int                                      `json:"limit"`
	Total      int                                      `json:"total"`
	Keys       []workqueue.QueuedKey[reconcile.Request] `json:"keys"`
}

// ObjectStatus is the answer of /debug/converge/api/object: one object, in
// every controller of its kind.
type ObjectStatus struct {
	Kind string `json:"kind"`
	// Cluster is the object's cluster, "" for the manager's own.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Controllers holds the object's state in each controller whose kind
	// matches; empty when no controller reconciles the kind.
	Controllers []KeyStatus `json:"controllers"`
	// Informers are the informers of the kind, for an object no controller
	// has seen; those of the manager's own cache only.
	Informers []informers.InformerStats `json:"informers"`
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

// matchesKind reports whether the user's spelling of a kind names gvk:
// its Kind ("Deployment", any case), "Kind.group" ("deployment.apps") or
// "group/version Kind" as Kind.String spells it.
func matchesKind(spelled string, gvk schema.GroupVersionKind) bool {
	spelled = strings.TrimSpace(spelled)
	if strings.EqualFold(spelled, gvk.Kind) || strings.EqualFold(spelled, KindOf(gvk).String()) {
		return true
	}
	kind, group, ok := strings.Cut(spelled, ".")
	return ok && strings.EqualFold(kind, gvk.Kind) && strings.EqualFold(group, gvk.Group)
}
