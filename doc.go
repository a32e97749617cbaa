// Package converge is a framework for writing Kubernetes controllers. This
// package holds no code; it maps the packages a controller author uses.
//
// # Reconcilers
//
// Package reconcile holds what user code implements and returns: Request,
// Result, Reconciler and ObjectReconciler, and TerminalError. It depends only
// on the standard library.
//
// # Work queues
//
// Package workqueue is the rate-limited, de-duplicating queue of keys between
// watches and reconcilers, with per-key backoff and a background priority for
// replays of the cache.
//
// # The shared cache
//
// Package informers is the shared cache: one informer per kind and selection,
// typed, unstructured or metadata-only, with read-only Readers, field indexes
// and errors that name why a kind cannot sync.
//
// # Managers and controllers
//
// Package framework holds the Manager (cache, client, lifecycle), the
// Controller and its Builder, watch sources, predicates and metrics.
//
// # Test control planes
//
// Package framework/envtest runs a real etcd and kube-apiserver (and
// optionally kube-controller-manager) for tests and local runs, built once
// by hack/control-plane.sh.
package converge
