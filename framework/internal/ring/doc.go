// Package ring is the sharding ring: the members of a replicated manager
// divide the buckets of sharding.Buckets among themselves on Leases, each
// claiming its share, renewing it, and handing a bucket over (drained, with
// the marks of what was reconciled) when the ring changes. The sharded
// controllers the ring drives are its Users; the ring knows nothing of what
// they read, and only the framework package uses it.
package ring
