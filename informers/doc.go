// Package informers is converge's shared cache: one informer (one LIST and one
// WATCH against the API server) per object type and selection, however many
// controllers and readers use it. It grows from client-go's informer design
// (Reflector → DeltaFIFO → Indexer, a shared processor fanning events out to
// listeners) and hides the factory, resync and sync-gating behind a Cache.
//
// Guarantees:
//
//   - One watch per selection: For called any number of times with the same type,
//     mode, namespace and selectors returns handles on the same informer.
//   - Shared, read-only objects: Get and List return the cached objects
//     themselves, without a deep copy. They must not be modified; DeepCopy
//     first to change one.
//   - Lean by default: managedFields are stripped before objects are stored
//     (Options.KeepManagedFields turns that off), built-in types travel as
//     protobuf, and the initial list is streamed where the server supports it.
//   - Named failures: a cache that cannot sync reports why, naming the type and
//     the cause seen (forbidden, resource not found, API server unreachable),
//     both from WaitForSync and from Health while it runs.
//   - Recovery: a type whose resource does not exist yet (a CRD installed later)
//     or cannot be listed yet (RBAC granted later) starts syncing once it can,
//     without a restart. A read through Cache.Get or Cache.List of a type the
//     identity may not list or watch fails at once instead, saying so, and
//     the cache drops that informer so that readiness does not wait on it.
//   - Read your own writes: after a write reported with ObserveWrite or
//     ObserveDeletion, Get of that object and List that could show it wait,
//     bounded, until the cache holds the write; a read through an informer
//     whose labels or metadata.name/namespace fields rule the written object
//     out does not wait.
//   - No false NotFound from Cache.Get (what a client's Get uses): a read of
//     a namespace outside what the cache holds fails with ErrNotCached,
//     naming both namespaces; a miss in a kind narrowed by labels or fields
//     (Options.ByKind) is confirmed with the API server, and an object that
//     exists outside the selection fails with ErrNotCached naming it. An
//     Informer answers for its own selection: NotFound there means no such
//     object in it.
//   - Resync per listener: each listener replays the cache at its own period
//     (Informer.AddListener), else its kind's (Options.ResyncByKind), else
//     Options.ResyncPeriod, whether it was added before or after the
//     informer started.
//   - Sharded reads: a kind routed to the buckets a process holds
//     (as the framework routes a sharded controller's kinds) is read from those buckets' informers by Cache.Get,
//     Cache.List and a KindReader, and from the informer of the whole kind
//     instead once one exists, since it holds every bucket. An index of a
//     kind (Cache.AddIndex) reaches every informer of it, the buckets'
//     made later included.
//   - Reads of a kind nothing watches: a Cache.Get, Cache.List or
//     KindReader read of a kind no informer holds in the mode read starts
//     an informer for the kind's default selection (Options.ByKind, else
//     Options.Namespace, else the whole cluster), waits for its initial
//     list and keeps it: later reads are served from memory, and the
//     memory grows with the kind. Such informers are flagged
//     (InformerStats.StartedByRead) and reported (Options.OnUnwatchedRead);
//     Options.RefuseUnwatchedReads refuses the read instead, with an error
//     wrapping ErrNotWatched.
//   - Memory accounted per informer: InformerStats counts each informer's
//     objects without listing them and estimates their heap bytes from a
//     sample (InformerStats.Bytes); values shared between objects are
//     counted once (Cache.SharedBytes).
//   - No silent field filters: MatchingFields evaluates metadata.name and
//     metadata.namespace and refuses other fields, which only the API server
//     knows (Selection.Fields narrows an informer on the server).
//
// Three modes cover the object forms controllers use: typed Go structs from a
// scheme, *unstructured.Unstructured for types known only at run time, and
// *metav1.PartialObjectMetadata when only metadata is needed (owner references,
// labels), which costs a fraction of the memory.
//
// See ExampleFor and ExampleMatchingFields.
package informers
