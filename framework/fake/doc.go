// Package fake is a Kubernetes API server in memory, for unit tests of
// controllers without a control plane: no etcd, no kube-apiserver, no
// network port.
//
// Start a Server seeded with objects, and hand its Config to the real
// converge code: framework.NewManager, its cache, client and controllers,
// and declarative reconcilers run on it unchanged, as do client-go's
// clientsets and dynamic and metadata clients.
//
//	srv := fake.Start(t, fake.Options{Scheme: scheme, Objects: []object.Object{parent}})
//	mgr, err := framework.NewManager(srv.Config(), framework.Options{Scheme: scheme})
//
// Requests go to the server through Config's transport, in memory; the
// server speaks HTTP as the API server does, so converge's own encodings,
// retries and error handling are what the test exercises. See the Example.
//
// # What is emulated
//
//   - Identity: create sets metadata.uid, creationTimestamp and a
//     resourceVersion; generateName gets five random characters. A create
//     that names a resourceVersion fails (500, as on the API server).
//   - resourceVersion: one counter for the whole server, growing with every
//     change. An update or patch naming an older resourceVersion fails with
//     409 Conflict (optimistic concurrency). An update without one applies
//     to the built-in kinds and fails with 422 Invalid for the others, as
//     for custom resources. A write that changes nothing keeps the
//     resourceVersion. An update naming another UID fails with 409
//     Conflict; a patch changing the UID, with 422 Invalid.
//   - generation, for custom resources and the built-in kinds that keep one
//     (workloads such as Pod, Deployment, StatefulSet, DaemonSet, Job and
//     CronJob; PodDisruptionBudget, HorizontalPodAutoscaler, Ingress,
//     NetworkPolicy, webhook configurations and admission policies, CRDs,
//     EndpointSlice): 1 at create, one more with every change outside
//     metadata and status (outside metadata for a kind without a status
//     subresource; EndpointSlice counts its labels too), and one
//     more when deletionTimestamp is set. The other built-in kinds
//     (ConfigMap, Secret, Service, Namespace, ...) keep none: it stays 0.
//   - Errors are metav1.Status answers with the API server's codes and
//     reasons (NotFound, AlreadyExists, Conflict, Invalid, BadRequest,
//     MethodNotAllowed, UnsupportedMediaType), naming the object and cause.
//   - Status subresource for every kind with a Status field (unless listed
//     in Options.NoStatusSubresource): create drops the status, writes to
//     the main resource keep the stored status, writes to /status change
//     the status only.
//   - Finalizers: deleting an object that has some only sets its
//     deletionTimestamp; the write that removes the last one deletes it; no
//     finalizer may be added to an object being deleted (Invalid).
//     Options.Objects may hold objects already being deleted.
//   - Garbage collection: when an object is deleted, each object with an
//     owner reference to it and no other existing owner is deleted (its own
//     dependents follow); one with another owner loses the dangling
//     reference. Orphan deletion removes the references instead; foreground
//     deletion deletes the dependents first. An object created or updated
//     with an owner reference to an owner that is gone is collected the
//     same way once the write commits.
//   - Server-side apply with field ownership, from client-go's schemas for
//     the built-in kinds, the structural schemas of Options.CRDs for their
//     custom resources, and for the others ObjectMeta's schema, status
//     conditions keyed by type, and a schema deduced from the object for
//     the rest (its other lists atomic); an apply that creates the object answers 201
//     Created; an apply naming a metadata.uid no object has creates
//     nothing (409 Conflict, "uid mismatch"), and one naming another
//     object's is Invalid (422), as kube-apiserver answers (test/parity runs
//     the same requests on both):
//     managedFields, 409 Conflict naming the manager and the field when
//     another manager owns a field (unless forced), removal of fields a
//     manager no longer applies. Non-apply writes are recorded too, under
//     the fieldManager parameter or the client's program name.
//   - Patches: JSON merge patch, JSON patch, and strategic merge patch for
//     the built-in kinds (415 for the others, as for custom resources).
//   - Lists and deletecollection by namespace, label selector and field
//     selector on metadata.name and metadata.namespace.
//   - Watches from a resourceVersion (every change after it, however old),
//     from none (the current objects first), and watch lists
//     (sendInitialEvents, ending with the initial-events-end bookmark); a
//     watch by selector sees an object that leaves it as DELETED.
//   - Encodings, as the client's Accept header asks: JSON; protobuf for
//     the built-in kinds; CBOR (a CBOR sequence for watches) for the
//     others, as from an API server with CBORServingAndStorage, so
//     converge's cache decodes what it would in production; metadata-only
//     answers (as=PartialObjectMetadata[List]) for the metadata client.
//     Requests may be sent as JSON, YAML (apply) or protobuf.
//   - Discovery (/api, /apis and each group version) for the kinds of
//     Options.Scheme, enough for converge's RESTMapper; /readyz, /livez and
//     /healthz answer ok (the probes of a cluster's engagement).
//
// # What is not
//
// There is no authentication or authorization (every request is allowed),
// no admission (objects may be created in namespaces that do not exist;
// no quota, no pod security), no defaulting and no validation beyond names,
// namespaces and apply configurations, no immutable fields but
// metadata.uid, and no conversion between versions (each version of a kind
// is stored apart). Garbage collection runs within the request that
// leaves garbage rather than later: the deleting request, or a create or
// update whose owner reference names an owner that is gone (the object is
// deleted, or loses that reference if another owner is left, right after
// the write commits; the write's answer is the object as written, and
// Options.Objects are not collected); a foreground deletion removes the owner at once,
// after its dependents, with no foregroundDeletion finalizer.
// Pods are deleted at once (no graceful termination). Subresources other
// than status (scale, eviction, ...) are not served, nor are dry runs (a
// dryRun request fails with 400), pagination (limit is ignored: one page),
// lists at an older resourceVersion (a list is of the current objects),
// periodic bookmarks, 410 Gone for an old resourceVersion, aggregated
// discovery, or update-creates (a PUT of a missing object is NotFound).
// Namespaces are objects like the others: deleting one removes it at once
// (no Terminating phase) and leaves the objects in it; use envtest with
// Options.ControllerManager to test namespace deletion. Every change is
// kept in memory for the server's lifetime (watches may start from any
// resourceVersion): a Server is meant for one test.
//
// # Faults
//
// A test may make the server misbehave as a real cluster sometimes does,
// per client identity (each Config from ConfigAs carries one):
// Intercept answers chosen requests itself (a 409 Conflict, a 500 without
// Retry-After) and sees how the others were answered; CrashAfter lets an
// identity commit k more writes and refuses every later one with no answer,
// as after kill -9 of its process; LagWatches has the identity's watches
// hold back up to n events, released in order (stale reads). Package
// framework/explore draws these faults from seeds to test controllers.
//
// A Server is safe for concurrent use; writes are applied one at a time in
// the order they arrive. Close (Start does it at the test's end) ends every
// watch; later requests fail with ErrClosed.
package fake
