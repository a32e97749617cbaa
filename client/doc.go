// Package client reads Kubernetes objects from the shared cache and writes
// them to the API server.
//
// A Client (built with New; a framework.Manager builds one and hands it out
// as Manager.Client) guarantees:
//
//   - Read-your-writes: Get and List read the shared cache
//     (informers.Cache) and wait for it to show this process's own writes,
//     so a reconcile never acts on state older than what it wrote. Reads
//     return deep copies the caller owns; reads the cache cannot serve fail
//     rather than report NotFound.
//   - Fenced writes: every write is checked against the fence given at
//     construction (Options.Fence), before it is built and again as it
//     leaves the process, and refused with an error wrapping the fence's.
//     The manager's fence refuses writes once the process lost leadership
//     (framework.ErrNotLeader) or the manager stopped
//     (framework.ErrManagerStopped), even from a reconcile that ignores its
//     context.
//   - Conditional writes: under a context made by WithPreconditions, a write
//     of an object read under it carries the object's resourceVersion as
//     read (and its UID for a deletion), which the API server checks: a
//     write arriving after the object changed fails with a Conflict
//     instead of undoing the change. The framework puts one in every
//     sharded reconcile's context.
//   - Errors name the object: every error says the operation, the kind and
//     the namespace/name, and wraps the cause (the API server's error, so
//     apierrors.IsNotFound and the like work).
//
// An APIReader (NewAPIReader, or Manager.APIReader) reads straight from the
// API server, for the reads the cache cannot serve. Both are safe for
// concurrent use.
//
// This package imports informers, never framework: the manager decides when
// writes are refused, the client only asks.
package client
