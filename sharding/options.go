package sharding

import (
	"time"

	"github.com/converge-dev/converge/lease"
)

// Options configures this process's membership of a sharding ring.
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
// for Lease.Duration, or for Lease.RenewDeadline after the last of them released
// it on leaving. To change a ring's layout, stop its members before the
// new ones start (a Deployment's Recreate strategy), or let the new ones
// wait, unready, until the old ones are gone; the README says more.
type Options struct {
	// Ring names the ring; processes with the same Ring and Lease.Namespace
	// share its buckets. It prefixes the Leases' names, so it must be a DNS
	// label of at most 40 characters. Zero means no sharding.
	Ring string

	// Buckets is how the hash space is cut: By, the field whose hash
	// places an object in a bucket, ByUID or ByNamespace; and Count, how
	// many buckets, the unit of handover and the most members that get
	// work, at most 4096. By namespace, all the objects of a namespace go
	// to one member, a parent and its children alike: a sharded controller
	// then reads the namespaced kinds it owns per held bucket as well
	// (framework.ControllerOptions.Sharded). By UID, only the primary kind
	// is read per bucket, and the kinds a sharded controller owns or
	// watches are cached whole in every member. By namespace, the objects
	// of a cluster-scoped primary kind all fall into one bucket, so one
	// member reconciles them all. Every member of a ring must use the same
	// Buckets: a member of a ring whose live members say otherwise is
	// refused (see Options). Zero By means ByUID; zero Count means 32.
	Buckets Buckets

	// Lease times and places the ring's Leases: this member's and the
	// buckets'. Lease.Duration is how long a bucket's Lease stays valid
	// after its holder's last renewal (how long a crashed member's buckets
	// wait); Lease.RenewDeadline how long after the start of its last
	// successful renewal a member still writes for a bucket;
	// Lease.RetryPeriod the interval between renewals, and between looks at
	// the ring when no Lease changes. Zero fields mean lease.Options'
	// defaults.
	Lease lease.Options

	// FormationDelay is how long a member waits, from joining the ring
	// (once its caches of the ring's Leases synced), before it claims
	// buckets while the ring is forming: while no other live member holds
	// a bucket Lease renewed within Lease.Duration (the ring's first start,
	// or a start after every member left). The members that join within
	// FormationDelay of the first then each claim their own share once,
	// as the assignment over all of them gives it, instead of the first
	// one claiming and listing every bucket and handing most of them over
	// as the others appear; replicas that start further apart (slow image
	// pulls) want a longer delay. A member joining a ring in which another
	// live member holds a bucket claims at once. A ring of one replica
	// replaced by a new one (a Recreate rollout) waits the delay each
	// time, unserved: set it negative there. Zero means Lease.RetryPeriod;
	// a negative value means no wait.
	FormationDelay time.Duration

	// MaxClockSkew is the most the wall clocks of the ring's members may
	// differ by. A member judges a Lease it has not yet seen change by the
	// renewal time the Lease carries, written by its holder's clock: one
	// renewed more than Lease.Duration + MaxClockSkew ago has expired, so
	// a member started after a crash serves the crashed member's buckets
	// at once rather than after watching its Leases for Lease.Duration. A
	// Lease seen to change is judged by this member's clock alone: it
	// expires Lease.Duration after the last change seen. Safety needs the
	// clocks within MaxClockSkew + Lease.Duration − Lease.RenewDeadline of
	// each other; a member that sees a renewal arrive later than that after
	// the time it carries stops judging by carried times and logs it.
	// Zero means 1 s; a negative value means never judge by carried times
	// (a member started after a crash waits Lease.Duration, as client-go's
	// leader election does).
	MaxClockSkew time.Duration

	// HandoverTimeout bounds how long a member giving a bucket up waits for
	// the bucket's in-flight reconciles; those still running then have
	// their contexts cancelled and are named in the log, and their writes
	// are refused. It must not be negative. Zero means 10 s.
	HandoverTimeout time.Duration
}
