// Package seam lets framework/explore read what a framework.Manager's
// controllers are doing (queues, in-flight keys, last results), which
// package framework exports only through its debug endpoint. Package
// framework sets Provider in an init function.
package seam

import "github.com/converge-dev/converge/framework/introspect"

// Provider returns the debug endpoint's view of mgr, a *framework.Manager.
var Provider func(mgr any) introspect.Provider
