package sharding

import (
	"time"

	"github.com/converge-dev/converge/lease"
)

// Options configures this process's membership of a sharding ring. The
// package documentation describes how the ring assigns, hands over and
// fences its buckets, and how it refuses a member of another layout.
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
	// refused (see Options). A ring without sharded controllers has no
	// buckets, whatever Buckets says. Zero By means ByUID; zero Count
	// means 32.
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

	// Clusters spreads whole clusters over the ring: each cluster the
	// manager's providers find is engaged by the one live member that
	// holds its Lease ("<Ring>.c.<cluster>"), assigned by rendezvous
	// hashing as buckets are, and handed over as a bucket is (its keys
	// wait, its reconciles drain for at most HandoverTimeout, then its
	// writes are refused with ErrClusterNotHeld and it is disengaged
	// before its Lease is released). Every member runs every provider; the
	// providers' descriptions are part of the layout, so members that find
	// their clusters differently refuse each other. The manager's own
	// cluster is not spread: with leader election, the leader alone
	// reconciles it (see the package documentation); whether the manager
	// elects a leader is part of the layout too, and a member the ring
	// refuses does not campaign for leadership (a leader it comes to
	// refuse steps down at once). It needs Ring. False
	// means every member engages every cluster its providers find.
	Clusters bool
}
