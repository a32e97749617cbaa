// Package framework runs controllers: a Manager owns the shared cache, the
// client and the process's lifecycle; a Controller drains a rate-limited work
// queue of keys into a Reconciler; a Builder wires a controller's watches.
//
// The smallest controller:
//
//	mgr, err := framework.NewManager(nil, framework.Options{}) // kubeconfig or in-cluster
//	err = framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
//		Complete(reconcile.ObjectFunc[*corev1.Pod](func(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
//			logr.FromContextOrDiscard(ctx).Info("seen", "phase", pod.Status.Phase)
//			return reconcile.Result{}, nil
//		}))
//	err = mgr.Start(ctx)
//
// NewBuilder(...).Owns(...).Complete(r) is the one way to wire a controller
// (see Builder); Builder.Build is Complete that also returns the
// *Controller, for tests and tools that read its name or queue length.
//
// Guarantees:
//
//   - One watch per kind: every controller and reader of a kind shares one
//     informer (see package informers).
//   - No key runs twice at once: a controller hands a key to one worker at a
//     time, however many workers it has and however often the key changes.
//   - Latest state, once: a key queued many times before a worker takes it is
//     reconciled once, reading the latest state from the cache.
//   - Real changes first: keys that only replay the cache (the initial list,
//     periodic resyncs) wait behind keys of real changes, without starving.
//   - Nothing lost: errors and panics are retried with per-key backoff;
//     shutdown stops taking keys, lets in-flight reconciles finish within
//     Options.GracefulShutdownTimeout, and leaves queued keys to whoever runs
//     next (reconciles are level-triggered, so the next process catches up).
//   - Bounded shutdown: Start returns at most GracefulShutdownTimeout plus
//     CancelGrace after its context ends, plus up to 5 seconds in which its
//     servers (webhooks, probes, metrics), stopped last, finish requests in
//     flight; reconciles that ignore their cancelled context are abandoned
//     and named in Start's error (ErrNotStopped).
//   - Fenced writes: once leadership is lost or the manager has stopped, the
//     manager's client (package client) refuses every write (ErrNotLeader,
//     ErrManagerStopped), so an abandoned or late reconcile cannot undo a
//     new leader's work.
//   - Sharding: with Options.Sharding, the replicas form a ring on Leases
//     and share the objects of controllers with ControllerOptions.Sharded:
//     each object is reconciled by one live replica, which caches only its
//     buckets; buckets move on join, leave and crash, drained before they
//     are released, a reconcile's writes are refused once its bucket is
//     no longer held (sharding.ErrBucketNotHeld), and a write that arrives late
//     anyway is refused by the API server once the object changed (each
//     is conditional on the object as read); a replica of another layout
//     (bucket count, shard key, sharded controllers) is refused. See
//     sharding.Options.
//   - Webhooks on every replica: AddWebhook and AddConversion serve a
//     type's admission webhooks and its hub-and-spoke conversion over TLS
//     (Options.Webhook), not gated by leader election; a rotated
//     certificate is served without a restart, and readiness waits for the
//     server (see package webhook).
//   - Named failures: bad configuration fails at Complete or Start with an
//     error naming the controller, kind and cause; a cache that cannot sync
//     names the kind and why (forbidden, CRD not installed, unreachable).
//
// Reconcile outcomes (result, error, terminal error, panic) are described in
// package reconcile. Metrics use controller-runtime's names (see Manager.Metrics).
//
// Next to /metrics, guarded the same way, the debug endpoint (package
// framework/introspect, at introspect.Path) shows each controller's queue
// by priority, in-flight keys, rates and informers, and for one object
// where it stands and its last reconciles (introspect.KeyStatus.Explain;
// converge explain prints it). Each controller keeps that history in a
// fixed budget (ControllerOptions.HistoryKeys). A reconcile that did all
// it could may say why its object is still not converged (what it waits
// for, what failed) with NoteBlocked: the object then counts as not
// converged, and every view says why.
//
// Reads the cache cannot serve (another namespace, a kind the identity may
// get but not list and watch) fail with an error saying so; Manager.APIReader
// reads those straight from the API server.
//
// A controller may resync (ControllerOptions.ResyncPeriod: its objects are
// reconciled again at that interval, as replays), own a kind
// through a metadata-only informer (Builder.OwnsMetadata), and delete a
// collection at once (client.Client.DeleteAllOf).
//
// # Logging
//
// The manager logs through Options.Logger, and routes client-go's klog
// output into the default logger it makes when none is given. The default
// is made once per process, so managers built one after another (tests)
// share it and never swap klog's global logger while another logs. Since
// logr.Discard() is the zero logr.Logger, passing it selects that default
// too: to drop every line, pass logr.FromSlogHandler(slog.DiscardHandler),
// which leaves klog as it is.
//
// See ExampleNewBuilder, ExampleManager, ExampleManager_APIReader,
// ExampleBuilder_OwnsMetadata and ExampleAddWebhook.
package framework
