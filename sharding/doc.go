// Package sharding names how converge spreads the objects of a kind over
// the members of a sharding ring: the field whose hash places an object
// (Field), how the hash space is cut into buckets (Buckets), the options of
// a ring member (Options), a member's view of its ring (Status), the error
// a write fails with once its bucket is no longer held (ErrBucketNotHeld),
// and the bucket of a sharded reconcile (BucketFrom).
//
// It is a leaf: it imports no converge package, so that informers (which
// reads one bucket of a kind), client (whose writes are fenced by a
// bucket) and framework (which runs the ring on Leases) share its names.
//
// Guarantees:
//
//   - Stable placement: an object's UID and namespace never change, so an
//     object never moves from one bucket to another.
//   - One hash: the bucket of an object is FNV-1a 64 of its field, the hash
//     API servers evaluate shard selectors with (KEP-5866), so
//     Buckets.Selector(i) selects on the server exactly the objects
//     Buckets.OfObject puts in bucket i.
//
// # Assignment and handover
//
// The names of fields below (Buckets, Lease, HandoverTimeout) are those of
// Options.
//
// The hash space of the shard field (Buckets.By: KEP-5866's FNV-1a 64 of each object's UID
// or namespace) is cut into Buckets.Count equal ranges. Each member holds a member
// Lease; each bucket has a Lease naming the member that holds it, claimed
// with a compare-and-swap on its resourceVersion and renewed by its holder
// every Lease.RetryPeriod. The buckets are assigned by rendezvous hashing over the
// live members, at most ceil(Buckets.Count/members) each, so every member computes
// the same assignment. A member gives a bucket up when the assignment moves
// it: it stops dispatching the bucket's keys, waits for their in-flight
// reconciles (at most HandoverTimeout), then releases the Lease; the new
// holder claims it, lists the bucket's objects and only then dispatches its
// keys. A bucket whose Lease was not renewed for Lease.Duration (its holder
// crashed or was cut off) is claimed by its new owner after that.
//
// # Marks: changes across a handover
//
// Changes cross a handover at change priority. The holder of a bucket
// writes on the bucket's Lease, for each sharded controller, a mark: the
// lowest resourceVersion an object of the bucket may have and still carry
// a change of the primary kind it did not reconcile (its queue still owed
// the key a change or a retry, or the event had not reached it). It writes
// the mark with every renewal of the Lease, and a last one when it gives
// the bucket up (on a rebalance, or when it stops). The next holder queues
// the objects of its initial list at or above the mark as changes and the
// others as replays, behind real changes. After a crash, the mark is the
// one of the last renewal, at most Lease.RetryPeriod older than the crash, so the
// changes since count as changes too. One owed key whose object is old (a
// retry, or a parent queued for a child's change) lowers the mark, and
// more objects then count as changes. A holder that cannot say (its
// informer listed again since it synced; resourceVersions are not decimal
// integers, as etcd's are) leaves the mark the Lease carries, which is
// older and so counts more objects as changes, or none: then every object
// is a replay. Changes of owned or watched kinds in flight at the handover
// are not marked: the keys they map to are replayed.
//
// # Write fences
//
// Writes are fenced per bucket: the client refuses a sharded reconcile's
// writes (ErrBucketNotHeld) once its bucket was given up, lost, or not
// renewed within Lease.RenewDeadline of the start of its last successful renewal.
// Another member can claim it only Lease.Duration after it last saw that
// renewal. A write that left the process before the fence closed but
// reaches the API server later (a process frozen between the check and the
// send, a partition that heals) is stopped by the server: every write of a
// sharded reconcile is conditional on the object as the reconcile read it
// (client.WithPreconditions): its resourceVersion, and its UID for a
// deletion. Once the next holder (or anyone) changed the object, the late
// write fails with a Conflict, and the key is reconciled by whoever holds
// its bucket now. The window that remains is the writes with no version to
// name: a Create, a server-side apply of an object the reconcile never
// read, and DeleteAllOf. A create is refused only when the object exists
// (AlreadyExists; a declarative child's first apply, alike), so a create
// delayed past the next holder's deletion of that object makes it again.
//
// # Layouts
//
// Members share buckets only with members of the same layout: Buckets.Count,
// Buckets.By, and the sharded controllers (their names and kinds). The ring's
// layout Lease (named after the ring, "-layout") records the layout that
// holds the ring; each member of it renews the Lease every Lease.RetryPeriod
// with a patch that first tests the layout, and a bucket's writes are
// fenced unless its holder renewed both the bucket's Lease and the layout
// Lease within Lease.RenewDeadline. A member of another layout is refused,
// whatever the timing: it claims no bucket, is not ready (its readiness
// and Status.Refused name both members and both layouts), the metric
// converge_shard_refusals_total counts it, and it keeps trying: it takes
// the ring over once no member of the layout the Lease records renewed it
// for Lease.Duration, or for Lease.RenewDeadline after the last of them
// released it on leaving: its layout is then the only one, and that is how
// a layout changes (the providers of spread clusters included). To change
// a ring's layout, stop its members before the new ones start (a
// Deployment's Recreate strategy), or let the new ones wait, unready,
// until the old ones are gone; the README says more.
//
// # Whole clusters
//
// With Options.Clusters, the ring hands out whole clusters besides its
// buckets: each cluster the manager's providers find (framework
// Options.Clusters.Providers) is engaged by one live member. Every member
// runs every provider and records on its member Lease a digest of the
// clusters it found. A cluster's Lease is named "<Ring>.c.<cluster>" (a
// dot, which no bucket, member or layout Lease of any ring has), labelled
// converge.dev/cluster; clusters are assigned by rendezvous hashing on
// their names, each member holding within one of every other's count, and
// claimed, renewed and expired as buckets are. A member engages a cluster
// only from its claim of the Lease until it gives it up or loses it, and
// every write through the cluster's client, and every write of a
// reconcile of the cluster's keys, is fenced by the Lease
// (ErrClusterNotHeld) and conditional on the object as read. A handover
// holds the cluster's keys, waits for its reconciles (HandoverTimeout),
// closes the fence, disengages the cluster, then releases its Lease; the
// next holder engages it and lists everything anew (replays).
//
// Members whose providers found different clusters (a Secret just made)
// keep exclusivity, which comes from the Leases alone: a held cluster
// moves to its new owner only once every live member records the same
// digest; one no provider finds any more is disengaged at once and its
// Lease released; a cluster whose Lease stayed free for Lease.Duration is
// claimed by any member that found it. How the clusters are found (each
// provider's Describe, or its type) is part of the layout: members whose
// providers differ refuse each other as members of other Buckets do, and
// turning Clusters on is a layout change. Only the manager's own cluster
// holds readiness up; a cluster still syncing does not.
//
// The manager's own cluster is not spread; leader election gives its work
// to one member. With leader election on, every member, leader or
// standby, claims and serves its clusters: a controller with
// cluster.Scope.Remote runs in every member, and its keys of the
// manager's own cluster (requests naming no cluster) wait until the member
// leads; the controllers of the manager's own cluster run in the leader
// alone. Without leader election, every member reconciles the manager's
// own cluster, a Remote controller's keys of it included.
//
// A ring without sharded controllers has no buckets: it claims no bucket
// Lease, and its layout is "no buckets" whatever Options.Buckets says, so
// a member that runs a sharded controller is another layout.
package sharding
