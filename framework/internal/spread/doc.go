// Package spread spreads the clusters a manager's providers find over the
// members of its sharding ring (sharding.Options.Clusters). Its Gate stands
// between the providers and the manager's cluster.Set: to the providers it
// is the cluster.Engager, to the ring a ring.ClusterUser. Every member runs
// every provider; the Gate records what they find and forwards a target to
// the Set only while the ring holds the cluster's Lease.
//
// Guarantees:
//
//   - One holder: a cluster is engaged here only from the ring's claim of
//     its Lease until the ring gives it up or loses it, and every write
//     through its client is fenced by that Lease (Target.Fence, wrapping
//     sharding.ErrClusterNotHeld once it is not held), as are the writes
//     of its reconciles to any cluster.
//   - Ordered handover: giving a cluster up holds its keys in every
//     controller, waits for its reconciles in flight (at most
//     HandoverTimeout), closes its fence, and only then disengages it and
//     releases its Lease.
//   - A cluster the providers no longer find is disengaged at once, while
//     its fence is still open, so a Listener's cleanup can write.
//
// Join makes a manager a member of its ring, with the ring's metrics.
package spread
