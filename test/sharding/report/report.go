// Package report holds what the sharding suite's member processes
// (test/sharding/testdata/member) tell its referee: the JSON bodies of the
// referee's POST /enter, /exit, /status and /engagement, the outcomes of a
// reconcile, and the annotation a reconcile writes.
//
// Times are this machine's clock in Unix nanoseconds, taken in the member
// process. A reconcile is named by its process and an ID counting from 1 in
// each process: a restarted member keeps its identity.
package report

// ObservedAnnotation holds the data.v of a ConfigMap a reconcile last
// wrote for.
const ObservedAnnotation = "sharding.converge.dev/observed"

// Spread clusters (a member run with --clusters): the namespaces labelled
// ClusterLabel=<the flag's value> are its clusters (cluster/namespaces);
// in each, the member copies data.v of ConfigMap Source into ConfigMap
// Copy, and sets Copy's ObservedAnnotation to it.
const (
	ClusterLabel = "sharding.converge.dev/spread"
	Source       = "source"
	Copy         = "copy"
)

// Outcomes of a reconcile, in Exit.Outcome.
const (
	// Written: the write was accepted.
	Written = "written"
	// Unchanged: the annotation already held the value; nothing written.
	Unchanged = "unchanged"
	// Fenced: the client refused the write (sharding.ErrBucketNotHeld).
	Fenced = "fenced"
	// Cancelled: the reconcile's context ended first.
	Cancelled = "cancelled"
	// Conflict: the API server refused the write with a Conflict: the
	// object changed since the reconcile read it (its precondition).
	Conflict = "conflict"
	// Error: the write failed otherwise.
	Error = "error"
)

// Enter is sent when a reconcile of Key begins, before its work.
type Enter struct {
	Member  string `json:"member"`
	Process int    `json:"process"`
	ID      int64  `json:"id"`
	Key     string `json:"key"`
	At      int64  `json:"at"`
}

// Exit is sent when the reconcile ID of Process ends. End is when its
// write returned, or when it decided not to write. ReadRV is the
// resourceVersion it read, WriteRV the one its accepted write produced.
type Exit struct {
	Member  string `json:"member"`
	Process int    `json:"process"`
	ID      int64  `json:"id"`
	Outcome string `json:"outcome"`
	ReadRV  string `json:"readRV"`
	WriteRV string `json:"writeRV,omitempty"`
	Value   string `json:"value"`
	End     int64  `json:"end"`
	Err     string `json:"err,omitempty"`
}

// Engagement is sent when a member's manager engages a cluster (Engaged)
// or disengages it, from its cluster.Listener: a disengagement before the
// cluster's client is fenced and, when the ring spreads clusters, before
// its Lease is released.
type Engagement struct {
	Member  string `json:"member"`
	Process int    `json:"process"`
	Cluster string `json:"cluster"`
	Engaged bool   `json:"engaged"`
	At      int64  `json:"at"`
}

// Status is a sharded member's ring status and the number of the suite's
// objects its cache holds, sent every 50 ms. Members and Refused are
// RingStatus's. A member spreading clusters reports the clusters it serves
// (RingStatus's Clusters.Serving) and whether its /readyz passes, with
// the probe's answer when it does not (Unready), instead of Cached.
type Status struct {
	Member        string   `json:"member"`
	At            int64    `json:"at"`
	Serving       []int    `json:"serving"`
	Syncing       []int    `json:"syncing"`
	Draining      []int    `json:"draining"`
	Members       []string `json:"members"`
	Refused       string   `json:"refused,omitempty"`
	Cached        int      `json:"cached"`
	ServerSharded bool     `json:"serverSharded"`
	Clusters      []string `json:"clusters,omitempty"`
	Ready         bool     `json:"ready"`
	Unready       string   `json:"unready,omitempty"`
}
