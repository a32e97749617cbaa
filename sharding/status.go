package sharding

// Status is a member's view of its sharding ring. The debug endpoint
// serves it as JSON too (framework.Manager.RingStatus).
type Status struct {
	// Ring and Identity are the ring's name and this member's identity.
	Ring     string `json:"ring"`
	Identity string `json:"identity"`
	// Buckets is how the ring cuts objects into buckets: the field it hashes (By) and
	// the bucket count, as BucketFrom reports them. It is zero when this
	// member runs no sharded controller: its ring then has no bucket.
	Buckets Buckets `json:"buckets"`
	// Forming is set while no live member holds a bucket and this member
	// waits (Options.FormationDelay) before claiming.
	Forming bool `json:"forming"`
	// Serving are the buckets whose keys this member dispatches: claimed,
	// and listed by every sharded controller. Syncing are claimed and still
	// listing; Draining are being given up, waiting for in-flight
	// reconciles.
	Serving  []int `json:"serving"`
	Syncing  []int `json:"syncing"`
	Draining []int `json:"draining"`
	// Fenced are buckets this member still claims but has not renewed
	// (their Lease, or the ring's layout Lease) within Lease.RenewDeadline,
	// as when it is cut off from the API server: it dispatches none of
	// their keys and their writes are refused (ErrBucketNotHeld) until a
	// renewal succeeds or it loses them. A bucket listed here is in no
	// other list, and the member is not ready while any is.
	Fenced []int `json:"fenced,omitempty"`
	// Members are the identities of the live members of this member's
	// layout it saw at its last look at the ring; itself included while
	// its member Lease was renewed within Lease.RenewDeadline and it is not
	// refused.
	Members []string `json:"members"`
	// Refused says why this member holds no bucket and is not ready: the
	// ring is held by members of another layout (another Buckets, set of
	// sharded controllers, providers or leader election), which it names
	// with the live members of that layout it has seen. The member keeps
	// trying, and joins once they are gone. Empty while not refused.
	Refused string `json:"refused,omitempty"`
	// Clusters are the clusters this member holds, when the ring spreads
	// clusters (Options.Clusters); nil otherwise.
	Clusters *ClusterStatus `json:"clusters,omitempty"`
}

// ClusterStatus is a member's hold of the clusters spread over its ring,
// by state, as Status lists its buckets; each list is sorted.
type ClusterStatus struct {
	Serving  []string `json:"serving"`
	Syncing  []string `json:"syncing"`
	Draining []string `json:"draining"`
	Fenced   []string `json:"fenced,omitempty"`
	// Seen is how many clusters this member's providers found.
	Seen int `json:"seen"`
	// Disagree names the live members whose providers found other
	// clusters than this member's, at its last look: held clusters move
	// to their new owners only once every member found the same.
	Disagree []string `json:"disagree,omitempty"`
}
