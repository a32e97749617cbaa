// Package hooks lets framework and declarative call the few functions of
// informers and workqueue that exist for them only (reading an informer
// without waiting, the reads of a sharded kind routed per bucket, the keys a
// queue still owes its workers), so that those packages need not export
// them.
//
// informers and workqueue set the hooks once, in their init, and the
// functions here wrap them with types; an argument typed any is the value
// of the informers or workqueue type the function's doc names, and any
// other value panics. hooks imports only the leaves (object, reconcile,
// sharding), so that informers and workqueue can import it.
package hooks
