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
package sharding
