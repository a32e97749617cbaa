package reconcile

import "context"

// Reconciler drives the object named by a Request towards its desired state.
//
// Reconcile is called from a controller's worker goroutines, never for the same
// Request on two workers at once. The context carries a logger with the
// controller name, the object's namespace and name and a reconcile ID (read it
// with logr.FromContextOrDiscard), and is cancelled when the controller stops or
// the per-reconcile timeout expires. See the package documentation for what each
// return value does.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// Func adapts a function to a Reconciler.
type Func func(ctx context.Context, req Request) (Result, error)

var _ Reconciler = Func(nil)

// Reconcile calls f(ctx, req).
func (f Func) Reconcile(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// ObjectReconciler is a Reconciler that is handed the object itself, as the
// shared cache holds it when the reconcile starts, instead of only its name.
//
// The object is shared with every other reader of the cache: do not modify it.
// Call DeepCopy first when you need a copy to change and write back.
//
// An ObjectReconciler that also implements DeletionReconciler is told when the
// object is gone; otherwise a deleted object's key is simply dropped.
type ObjectReconciler[T any] interface {
	Reconcile(ctx context.Context, obj T) (Result, error)
}

// ObjectFunc adapts a function to an ObjectReconciler.
type ObjectFunc[T any] func(ctx context.Context, obj T) (Result, error)

var _ ObjectReconciler[any] = ObjectFunc[any](nil)

// Reconcile calls f(ctx, obj).
func (f ObjectFunc[T]) Reconcile(ctx context.Context, obj T) (Result, error) { return f(ctx, obj) }

// DeletionReconciler is the optional second half of an ObjectReconciler: the
// controller checks for it with a type assertion and, when present, calls
// ReconcileDeleted once an object it watched is no longer in the cache.
//
// Deletion notices are best effort: an object deleted while the controller was
// not running is never reported. Work that must happen before an object goes
// away belongs behind a finalizer.
type DeletionReconciler[T any] interface {
	ReconcileDeleted(ctx context.Context, gone Tombstone[T]) (Result, error)
}

// Tombstone describes an object that has been deleted.
type Tombstone[T any] struct {
	// Request names the deleted object. It is always set.
	Request Request
	// Last is the last state of the object the cache saw. It may be older than
	// the state at deletion (when the deletion was noticed on a re-list after a
	// watch gap), and it is the zero value when the cache never held the object.
	// Like cached objects, it is shared: do not modify it.
	Last T
}

// Sequence runs steps in order on the same object, as one reconcile of a
// controller with several steps. It stops at the first error (returning it,
// so the whole sequence is retried) and otherwise returns the shortest
// non-zero RequeueAfter any step asked for.
func Sequence[T any](steps ...ObjectReconciler[T]) ObjectReconciler[T] {
	return ObjectFunc[T](func(ctx context.Context, obj T) (Result, error) {
		var out Result
		for _, s := range steps {
			res, err := s.Reconcile(ctx, obj)
			if err != nil {
				return res, err
			}
			if res.RequeueAfter > 0 && (out.RequeueAfter == 0 || res.RequeueAfter < out.RequeueAfter) {
				out.RequeueAfter = res.RequeueAfter
			}
		}
		return out, nil
	})
}
