// Package fence is the time check of a Lease's holder: it stops writing
// once its last successful renewal of the Lease, on this process's
// monotonic clock, is Lease.RenewDeadline old, whatever the Lease it last
// read says. Another process may take the Lease once it expires
// (Lease.Duration after the renewal, a margin above RenewDeadline), so a
// holder that was frozen, starved or cut off refuses before then.
//
// Lapsed is the check, shared by the sharding ring's buckets and the
// leader election; Lock wraps the resourcelock the leader elector renews
// through and records when its own record was last written.
package fence
