// Package declarative turns a function that computes what should exist into
// a complete controller: the function takes the parent object and returns
// its desired children and status; converge applies, owns, prunes and
// watches the children, writes the status, and runs cleanup before deletion.
//
// For each reconcile of a parent, in order:
//
//  1. Deleted parent (deletionTimestamp set): run Finalizer.Finalize, delete
//     the children found by label, remove the finalizer. Nothing else.
//  2. Add the finalizer when cleanup is needed (a Finalizer, or children that
//     owner references cannot tie to the parent: cluster-scoped ones, or ones
//     in other namespaces), before the first child exists.
//  3. Ask the Reconciler for the desired State (Desired may read the
//     parent's live children with LiveChild), and record the Events it
//     asks for. State{KeepChildren: true} skips steps 4 and 5.
//  4. Server-side apply each child with the field manager, a controller owner
//     reference (or a label link) and labels naming the parent, forcing
//     ownership of the fields it declares. Fields other managers own are left
//     alone. A child whose live copy already carries everything declared (and
//     the hash of the last apply) is not written again.
//  5. Delete the children that carry the parent's labels but are no longer
//     desired (prune). They are found through the cache, which is rebuilt
//     from the cluster, so pruning survives restarts.
//  6. Server-side apply the status to the status subresource, unless it
//     already holds exactly that status. converge remembers the status it
//     last applied to each parent: a typed parent from the cache shows a
//     field the server does not hold as zero, so zero values are written,
//     and written again if someone removes them.
//
// Every child kind is watched (Options.Children), so a child deleted or
// changed by hand is re-applied: drift is reverted. Reads after converge's
// own writes wait for the cache to catch up (see informers.Cache.ObserveWrite),
// so there are no duplicate creates and no conflict loops; status writes that
// change nothing are skipped, so there is no hot loop. Build conditions with
// Conditions, which keeps lastTransitionTime while a condition's status holds.
//
// See ExampleNew.
package declarative
