// Package shardtest holds a switch that weakens a sharding ring on
// purpose, for the negative controls of the sharding tests: they show
// that a test can see what the switch lets through. Nothing in the
// library sets it, and, being internal, no program outside this module
// can.
package shardtest

import "sync/atomic"

var noPreconditions atomic.Bool

// DisablePreconditions makes the writes of every sharded reconcile in this
// process carry no precondition (client.WithPreconditions is not put in
// their contexts), so that a write delayed past its bucket's handover
// lands over the next holder's.
func DisablePreconditions() { noPreconditions.Store(true) }

// PreconditionsDisabled reports whether DisablePreconditions was called.
func PreconditionsDisabled() bool { return noPreconditions.Load() }
