package informers

import (
	"sync/atomic"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/object"
)

// Listener receives one informer's events for objects of type T. Objects are
// shared with the cache and every other listener: do not modify them.
type Listener[T object.Object] interface {
	// OnAdd is called for each object in the initial list (isInInitialList
	// true) and for each object created later.
	OnAdd(obj T, isInInitialList bool)
	// OnUpdate is called for each change, and for each object on a periodic
	// resync (then oldObj and newObj have the same resource version).
	OnUpdate(oldObj, newObj T)
	// OnDelete is called with the last state the cache held. stale is true
	// when the deletion was noticed on a relist after a watch gap, so obj may
	// predate the deletion.
	OnDelete(obj T, stale bool)
}

// ListenerFuncs adapts functions to a Listener; nil functions ignore their event.
type ListenerFuncs[T object.Object] struct {
	AddFunc    func(obj T, isInInitialList bool)
	UpdateFunc func(oldObj, newObj T)
	DeleteFunc func(obj T, stale bool)
}

var _ Listener[object.Object] = ListenerFuncs[object.Object]{}

// OnAdd calls AddFunc if set.
func (f ListenerFuncs[T]) OnAdd(obj T, isInInitialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(obj, isInInitialList)
	}
}

// OnUpdate calls UpdateFunc if set.
func (f ListenerFuncs[T]) OnUpdate(oldObj, newObj T) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(oldObj, newObj)
	}
}

// OnDelete calls DeleteFunc if set.
func (f ListenerFuncs[T]) OnDelete(obj T, stale bool) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(obj, stale)
	}
}

// untyped adapts a Listener[T] to client-go's untyped handler interface.
// An object of another type, which only a Transform breaking its rule puts
// in the cache, is not handed to h: the event is dropped and reported with
// the error a read of that object returns (see as), rather than crashing
// the informer's goroutine.
//
// n counts the adds and deletes handed to it: the informer's object count
// (see counts).
type untyped[T object.Object] struct {
	h Listener[T]
	e *entry
	n *atomic.Int64
}

// typed returns obj as a T, or reports it and returns false.
func (u untyped[T]) typed(obj any) (T, bool) {
	t, err := as[T](u.e, obj)
	if err != nil {
		utilruntime.HandleError(err)
	}
	return t, err == nil
}

func (u untyped[T]) OnAdd(obj any, isInInitialList bool) {
	u.n.Add(1)
	if t, ok := u.typed(obj); ok {
		u.h.OnAdd(t, isInInitialList)
	}
}

func (u untyped[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := u.typed(oldObj)
	n, ok2 := u.typed(newObj)
	if ok1 && ok2 {
		u.h.OnUpdate(o, n)
	}
}

func (u untyped[T]) OnDelete(obj any) {
	u.n.Add(-1)
	stale := false
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, stale = d.Obj, true
	}
	if t, ok := u.typed(obj); ok {
		u.h.OnDelete(t, stale)
	}
}
