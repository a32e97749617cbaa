// Package declarative turns a function that computes what should exist into
// a complete controller: the function takes the parent object and returns
// its desired children and status; converge applies, owns, prunes and
// watches the children, writes the status, and runs cleanup before deletion.
//
// For each reconcile of a parent, in order:
//
//  1. Deleted parent (deletionTimestamp set): run Finalizer.Finalize, delete
//     the children it owns, listed from the API server (not the cache, which
//     may not show a child applied a moment ago; a child kind no longer
//     served, its CRD removed, has none), release the retained ones (see
//     Child.Retain), then remove the finalizer, whoever added it. Nothing
//     else. While the deletion waits (a child another is After is deleted
//     once that one is gone, and someone's finalizer may hold it), the
//     reconcile's reconcile.Blocker and the Ready condition say for what
//     ("deletion waits for Deployment web (Terminating, finalizer
//     example.com/hold)").
//  2. Add the finalizer when cleanup is needed (a Finalizer, or children that
//     owner references cannot tie to the parent: cluster-scoped ones, or ones
//     in other namespaces), before the first child exists. A parent deleted
//     meanwhile gets no children.
//  3. Ask the Reconciler for the desired State (Desired may read the
//     parent's live children with LiveChild), and record the Events it
//     asks for. State{KeepChildren: true} skips steps 4 and 5. A Desired
//     that fails (an error, a panic) stops here, and says so in the Ready
//     condition (see Reconciler).
//  4. Server-side apply each child with the field manager, a controller owner
//     reference (or a label link) and labels naming the parent, forcing
//     ownership of the fields it declares. Fields other managers own are left
//     alone. A child is not written again when its live copy carries the
//     hash of the last apply and merging the child into it, as server-side
//     apply does with the kind's schema as the API server publishes it
//     (atomic maps, structs and lists replaced whole, granular ones and
//     associative lists merged), would change nothing. A child is only applied over an object the
//     parent owns (see below); the first apply of a child the cache does not
//     show fails if the object exists after all, and is decided again on the
//     live object. Children are applied at once, up to 8 at a time, but for
//     the order below; children no owner reference can reach are applied
//     one after another, as each is recorded in the parent's ledger. The
//     reconcile waits for every apply, and a panic in one (in a
//     Conflict.Note) is the reconcile's, raised once the others ended.
//  5. Delete the children the parent owns that are no longer desired
//     (prune), or release the retained ones. They are found through the
//     cache, which is rebuilt from the cluster, so pruning survives
//     restarts.
//  6. Server-side apply the status to the status subresource, unless it
//     already holds exactly that status. converge remembers the status it
//     last applied to each parent: a typed parent from the cache shows a
//     field the server does not hold as zero, so zero values are written,
//     and written again if someone removes them.
//
// # Order and readiness
//
// A child wrapped with NewChild may be After other children, have its own
// ReadyWhen, or be included only when a condition holds (IncludeWhen).
// Children are then applied in dependency order, in waves: a child goes in
// the wave after the last one holding a child it is After, and each waits
// until every child it is After exists and is ready; a child not allowed yet is left as
// it is (not created, not changed, not pruned). Pruning and deletion of a
// deleted parent go in reverse: an object is deleted only once no child
// After it (as its AfterAnnotation records) is on the API server, and the
// parent gets converge's finalizer so that its deletion waits for that.
// Foreground cascading deletion of the parent bypasses the order: the
// garbage collector then deletes the children at once.
//
// A Child may also say how it lives and goes: ReplaceWhenImmutable deletes
// and creates again an object whose apply the API server refuses because a
// field cannot change; RunOnce does not create again a child that was
// ready for its content once it disappears (a Job deleted by its
// ttlSecondsAfterFinished), recording the runs in the parent's
// RanAnnotation; Retain releases a child instead of deleting it when its
// parent is deleted or no longer declares it.
//
// A child kind the API server does not serve (its CRD not installed) holds
// nothing back unless listed in Options.RequiredKinds: parents that
// declare no child of it converge, and a child of it waits for the kind,
// as the parent's Ready condition says, until it is served; see
// Options.RequiredKinds.
//
// Without a ReadyWhen a child is ready as its kind's built-in readiness
// says: Deployment (observedGeneration current, Available, every replica
// updated and available), StatefulSet (ready and updated replicas),
// DaemonSet (every scheduled pod updated and available), Job (Complete),
// PersistentVolumeClaim (Bound), Service (of type LoadBalancer: an ingress
// assigned; others at once), Pod (Ready, or Succeeded), any kind with a
// Ready (else Available) condition for its current generation, and any
// other kind once it exists. A child that has failed for good is a
// failure, not a wait, with or without a ReadyWhen: a Job whose Failed
// condition is True, a Deployment past its progress deadline (Progressing
// False, reason ProgressDeadlineExceeded, for its current generation), a
// Pod in phase Failed, a PersistentVolumeClaim in phase Lost, and what a
// Child.FailedWhen says; a ready child has not failed.
// A child being deleted (deletionTimestamp set: pruned, left out and
// declared again, or deleted by hand, and held by someone's finalizer) is
// not ready, whatever its status says, and its message names the
// finalizers that hold it; it is applied again once it is gone.
// Readiness is read from the cache each reconcile; a change to a child
// reconciles its parent, so a waiting parent never polls.
//
// A parent with any NewChild child gets ReadyCondition in its status (when
// State.Status has a conditions field), observedGeneration set: True once
// every child is ready, else the first failed, waiting or unready child,
// with what it waits for (its kind's readiness, or the words of its
// ReadyWhen) and since when. The reconcile notes the same reason and
// message as its reconcile.Blocker, so the manager's debug page and
// converge explain say what the condition says, and count the parent as
// not converged until it is True.
//
// A State that cannot be applied as declared (a child of a kind not in
// Options.ChildKinds, without a name, declared twice, outside the manager's
// cache; a cycle, a child After one not declared) is a configuration
// error: nothing is applied or pruned, the condition says why (reason
// ChildGraphReason) on any parent whose status has conditions, a Warning
// Event is recorded once per change of the error, and the reconcile fails
// terminally. See ExampleNewChild.
//
// # Ownership
//
// A parent owns an object when the object's controller owner reference names
// the parent's UID or, for a child no owner reference can reach (a
// namespaced parent's child in another namespace, or a cluster-scoped one)
// and for a retained child (which carries none, see Child.Retain),
// when it has no controller, its ParentUIDLabel names the parent, and the
// parent's ledger (LedgerAnnotation) lists its UID, recorded from the API
// server's answer when converge created or adopted it, or the claim
// (ClaimAnnotation) converge recorded before creating it. A ledger that does
// not start with the parent's own UID lists nothing; labels alone only find
// candidates. A declared child whose object
// exists and is not owned is a conflict: the object is left untouched, a
// Warning Event of reason Options.Conflict.Reason naming it is recorded on the
// parent, nothing is pruned, and the reconcile fails with an error wrapping
// ErrChildConflict (retried with backoff, and at once when that object
// changes or is deleted). A child wrapped with Adopt may take over an
// existing object that no owner controls and whose ParentUIDLabel names no
// other parent. Only owned objects are ever pruned
// or deleted on finalize.
//
// A child put in another engaged cluster with Child.InCluster is owned the
// same way, by its labels and the ledger, whose entry names the cluster: an
// owner reference there would have that cluster's garbage collector delete
// it. Such children are read from that cluster's cache (its objects labelled
// with this controller's ManagerLabel), written through its client, pruned
// and finalized there; a cluster not engaged or unhealthy holds its children,
// its prune and the parent's deletion until it is engaged, or healthy,
// again.
//
// A parent deleted and made again under the same name (a new UID) finds its
// predecessor's children still there until the garbage collector (or the
// predecessor's finalizer) deletes them: that is not a conflict. The
// reconcile fails without an Event and is retried, and each such child's
// deletion reconciles the new parent, which then applies its own.
//
// With the manager's cache limited to one namespace
// (framework.Options.Cache.Namespace), namespaced children must be declared
// in it: converge could not watch them elsewhere, so it rejects them. In a
// controller sharded by namespace (framework.ControllerOptions.Sharded,
// with sharding.Options.Buckets.By sharding.ByNamespace), a
// namespaced parent's namespaced children must be in the parent's
// namespace, for the same reason: each member watches the namespaces of
// its buckets only.
//
// Every child kind is watched (Options.ChildKinds), so a child deleted or
// changed by hand is re-applied: drift is reverted. Reads after converge's
// own writes wait for the cache to catch up (see informers.Cache.ObserveWrite),
// so there are no duplicate creates and no conflict loops; status writes that
// change nothing are skipped, so there is no hot loop. Build conditions with
// Conditions, which keeps lastTransitionTime while a condition's status holds.
//
// See ExampleNew for a complete controller, and ExampleLiveChild for a
// Desired that reads its children.
package declarative
