// Package reconcile holds the data types and interfaces shared by every converge
// controller: the Request naming one object, the Result of a reconcile, the
// Reconciler interfaces users implement, and the errors that steer retries.
//
// It is a leaf package: it imports only the standard library, so API types,
// tests and tools can depend on it without pulling in client-go.
//
// # Reconcilers
//
// A Reconciler is handed a Request (namespace and name) and drives the world
// towards the state that object declares. Reconcilers are level-triggered: they
// are told which object to look at, never what changed, and must give the same
// answer when called again for the same state. An ObjectReconciler is handed the
// object itself, read from the shared cache, and is told through an optional
// DeletionReconciler when the object is gone.
//
// # Outcomes
//
// What the controller does with each (Result, error) pair a reconcile returns:
//
//	error                 Result.RequeueAfter   what happens
//	nil                   0                     done; the key's backoff is reset; it runs again on the next change
//	nil                   > 0                   backoff reset; the key runs again after RequeueAfter (or sooner on a change)
//	non-nil               ignored               logged once, counted as an error, retried with per-key exponential backoff
//	TerminalError         ignored               logged once, counted as terminal, backoff reset, not retried until the next change
//	(panic)               -                     recovered, logged with its stack, counted as a panic, retried like an error
//
// A key is never reconciled by two workers of one controller at once, and a key
// that changes many times while it waits is reconciled once, at its latest state.
//
// # Reasons
//
// Each reconcile also has a Reason (change, retry, requeue or replay), kept out
// of Request so that it never splits one key into two. framework.ReasonFrom
// returns it; logs and the converge_reconciles_total metric carry it.
//
// See ExampleFunc for the smallest reconciler.
package reconcile
