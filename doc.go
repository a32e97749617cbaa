// Package converge is a framework for writing Kubernetes controllers. This
// package holds no code; it maps the packages a controller author uses.
// Imports go one way: reconcile, object, lease and sharding, then
// workqueue and informers (which never import each other), then client,
// then cluster, then framework, then declarative; test/layering checks it. The one exception is
// internal/testenv, test support that imports framework: only _test.go files
// may import it, which test/layering checks too.
// internal/hooks lets framework and declarative call the few functions
// informers and workqueue keep unexported for them; it imports only the
// leaves, which test/layering checks.
//
// # Reconcilers
//
// Package reconcile holds what user code implements and returns: Request,
// Result, Reconciler and ObjectReconciler, TerminalError, and Blocker (why an
// object is not converged yet, which framework.NoteBlocked records). It depends only
// on the standard library.
//
// # Objects
//
// Package object names object.Object, the Kubernetes object type (typed,
// unstructured or metadata-only) that the cache, the client, the framework
// and the declarative layer all take.
//
// # Sharding
//
// Package sharding names how objects are spread over the members of a
// sharding ring: the field hashed (ByUID, ByNamespace), the buckets the
// hash space is cut into, a member's options and status, the error of a
// write whose bucket is no longer held, and the bucket of a sharded
// reconcile. It is a leaf, so the cache, the client and the framework share
// its names; the ring itself, on Leases, runs inside framework.
//
// Package lease holds the options of a Lease that processes take turns
// holding, shared by leader election and the sharding ring.
//
// # Work queues
//
// Package workqueue is the rate-limited, de-duplicating queue of keys between
// watches and reconcilers, with per-key backoff, a replay priority for
// replays of the cache, and fair flows (one per cluster, say) that can be
// capped, paused and dropped.
//
// # The shared cache
//
// Package informers is the shared cache: one informer per kind and selection,
// typed, unstructured or metadata-only, with read-only Readers, field indexes
// and errors that name why a kind cannot sync.
//
// # Clients
//
// Package client reads from the shared cache with read-your-writes and
// writes to the API server: create, update, patch, server-side apply,
// delete, delete-all-of, the status subresource, and an APIReader for reads
// the cache cannot serve. Writes are fenced (refused once the manager says
// so) and every error names the object.
//
// # Clusters
//
// Package cluster is the clusters a manager talks to: a Cluster is one API
// server with its cache, client, API reader, REST mapper and health; the Set
// is the registry of the engaged ones, the manager's own (named "") among
// them; Providers engage and disengage the others, and cluster.From(ctx)
// is the cluster of a reconcile's request (reconcile.Request.Cluster).
// Engagement never blocks a provider, and a disengaged cluster's client
// refuses writes (ErrDisengaged). Packages cluster/secrets (kubeconfig
// Secrets) and cluster/namespaces (each namespace a cluster, for tests) are
// providers; they import cluster and informers, never framework.
//
// # Managers and controllers
//
// Package framework holds the Manager (cache, client, lifecycle), the
// Controller and its Builder, watch sources, predicates and metrics.
//
// Package framework/controllerutil holds the object edits most reconcilers
// make: controller owner references, finalizers, merge patches, and
// create-or-update / create-or-patch through the manager's client.
//
// Inside framework, the Lease ring of framework.Options.Sharding lives in
// framework/internal/ring,
// which only this package imports: it claims, renews and hands over the
// buckets, and drives each sharded controller's primary source through
// ring.User. That source, the informers of the buckets held, read per
// bucket, with the marks a bucket's next holder starts from, lives in
// framework/internal/shard (shard.Primary); sharded.go binds the
// controller's sources to it through shard.Source. A Controller learns of
// sharding only through its gate (shard.Gate), nil when it is not
// sharded. framework/internal/syncgc lowers GOGC while
// caches first sync, for the manager and the ring. framework/internal/fence
// is the time check the ring's buckets and the leader's Lease share: a
// holder refuses writes once its last renewal is RenewDeadline old.
//
// A controller of many clusters (ControllerOptions.Clusters) keeps its
// sources bound to each engaged cluster other than the manager's own in
// framework/internal/binding (binding.Set, a listener of the manager's
// cluster.Set): it binds them at engagement, runs the cluster's flow of the
// queue once they synced and while the cluster is healthy, and drops the
// cluster's keys (from the queue and the reconcile history) and cancels
// its reconciles at disengagement; framework's
// binding.go hands it the sources through binding.Source. With
// Options.Sharding.Clusters, framework/internal/spread (spread.Gate) stands
// between the providers and the cluster.Set: it forwards a cluster to the
// Set only while the ring holds the cluster's Lease (ring.ClusterUser),
// and hands it over through the bindings' binding.Registry; a controller
// of every cluster then runs in every member, and holds its keys of the
// manager's own cluster until the member leads (binding.Set.HoldLocal).
// framework/internal/adapter turns an ObjectReconciler into the Reconciler
// the workers call, reading each key's object from its cluster's cache and
// keeping the tombstones a DeletionReconciler is handed.
//
// Five more rooms below framework, each imported only by it, hold one
// concept each: framework/internal/history keeps each controller's recent
// reconciles and turns them into the debug endpoint's records and series;
// framework/internal/reconcilelog
// is the log sink of one reconcile (what ReasonFrom and NoteBlocked read)
// and the call that turns its panic into an error;
// framework/internal/recorder completes, sends and redacts the events of
// Manager.EventRecorder; framework/internal/served watches the kind of a
// WhenServed source while the API server serves it; and
// framework/internal/metrics holds the Prometheus series a manager exports
// (reconciles by outcome, work queues, the shared cache, the leader lease,
// client-go's requests), which Manager.Metrics returns. Its words for a
// reconcile's outcome (success, requeue_after, error, terminal, panic) are
// the ones the controller logs, traces and keeps in its history.
//
// # Webhooks
//
// Package framework/webhook holds admission (Defaulter, Validator) and
// hub-and-spoke conversion (Hub, Convertible) handlers as plain
// http.Handlers; framework.AddWebhook and framework.AddConversion serve them
// on the manager's TLS webhook server, and envtest.InstallWebhooks points a
// test control plane at it.
//
// # Declarative controllers
//
// Package declarative turns a function from a parent object to its desired
// children and status into a complete controller: converge server-side
// applies the children, owns them, prunes those no longer desired, reverts
// drift, writes the status and runs cleanup before the parent is deleted.
//
// # Introspection
//
// Package framework/introspect is the manager's debug endpoint
// (/debug/converge/): the JSON it serves, the page, and KeyStatus.Explain,
// the lines converge explain prints. It sits below framework, which serves
// it through introspect.Provider, and serves the lower layers' own types
// (workqueue.Stats, workqueue.KeyState, informers.InformerStats,
// sharding.Status) rather than restating them.
//
// # Finding controller bugs
//
// Package framework/explore runs a program's controllers (the setup
// function its main calls) on framework/fake, the API server in memory,
// under seeded schedules of faults: 409 Conflicts and 500s on writes, a
// crash right after a write and a restart, watches lagging behind. It
// checks the invariants a test writes and convergence at each quiet point
// and counts deletes against the fault-free schedule, shrinks a failing
// schedule's faults, and prints the command that replays it.
//
// # Test control planes
//
// Package framework/envtest runs a real etcd and kube-apiserver (and
// optionally kube-controller-manager) for tests and local runs, built once
// by hack/control-plane.sh.
//
// # Scaffolding
//
// Command cmd/converge scaffolds controller projects on converge and adds
// APIs and controllers to them; a generated project builds and passes its
// own specs on a real control plane. Its explain command asks a running
// manager's debug endpoint why an object is or is not converged.
//
// # Examples
//
// Commands examples/podlogger, examples/podphases, examples/staticsite,
// examples/webapp and examples/fleet are complete controllers: a typed
// reconciler logging pods, the README's controller, a declarative
// controller for a custom resource, one whose children are applied in
// order, and one that copies the hub's policies into every cluster a
// kubeconfig Secret engages. Package
// examples/replicas is the README's controller-runtime controller,
// converted.
package converge
