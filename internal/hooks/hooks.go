package hooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// The hooks, each set once by the package that implements it, in its init.
var (
	// peek is set by informers: Informer.peek of inf, an *informers.Informer[T].
	peek func(inf any, key types.NamespacedName) (object.Object, bool)
	// bucketReader is set by informers: a reader of kind's held buckets,
	// of the T of witness, an *informers.Informer[T].
	bucketReader func(witness any, kind schema.GroupVersionKind, b sharding.Buckets, held any) (any, error)
	// routeReads is set by informers: Cache.routeReads of c.
	routeReads func(c any, example object.Object, sel any, b sharding.Buckets, held func() []int) error
	// routed is set by informers: KindReader.routed of r.
	routed func(r any) (sharding.Buckets, bool)
	// owed is set by workqueue: Queue.owed of q, fn being a
	// func(K, reconcile.Reason) of q's K.
	owed func(q any, fn any)
)

// SetInformers sets the hooks package informers implements. It is called
// once, from informers' init.
func SetInformers(
	peekFn func(inf any, key types.NamespacedName) (object.Object, bool),
	bucketReaderFn func(witness any, kind schema.GroupVersionKind, b sharding.Buckets, held any) (any, error),
	routeReadsFn func(c any, example object.Object, sel any, b sharding.Buckets, held func() []int) error,
	routedFn func(r any) (sharding.Buckets, bool),
) {
	peek, bucketReader, routeReads, routed = peekFn, bucketReaderFn, routeReadsFn, routedFn
}

// SetWorkqueue sets the hook package workqueue implements. It is called
// once, from workqueue's init.
func SetWorkqueue(owedFn func(q any, fn any)) { owed = owedFn }

// Peek returns the object inf, an *informers.Informer[T], holds for key
// now, and whether it holds one, without waiting for a sync or for the
// manager's own writes: for bookkeeping that must not block. After the
// informer stops, it reports what it held last. The object is shared: do
// not modify it.
func Peek[T object.Object](inf any, key types.NamespacedName) (T, bool) {
	obj, ok := peek(inf, key)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := obj.(T)
	return t, ok
}

// NewBucketReader returns a reader R (an interface the caller defines,
// which informers' bucket reader of T satisfies: Get, List, BucketOf) of
// one kind from the informers of the buckets held, one informer per bucket,
// each made with Selection{Shard: b.Selector(i)}. witness is a typed nil
// *informers.Informer[T] naming T; held, a func() map[int]*informers.Informer[T],
// returns the buckets held now, each with its informer, or nil while the
// bucket has none. held is called on every read, so it must be fast and
// safe for concurrent use, and the map it returns is only read.
func NewBucketReader[R any](witness any, kind schema.GroupVersionKind, b sharding.Buckets, held any) (R, error) {
	var zero R
	r, err := bucketReader(witness, kind, b, held)
	if err != nil {
		return zero, err
	}
	rr, ok := r.(R)
	if !ok {
		return zero, fmt.Errorf("hooks: the bucket reader %T is not a %T", r, &zero)
	}
	return rr, nil
}

// RouteReads routes the reads of objects like example in selection sel (an
// informers.Selection) through the cache c (an *informers.Cache) to the
// informers of the buckets held() returns. See informers' routeReads for the
// rules.
func RouteReads(c any, example object.Object, sel any, b sharding.Buckets, held func() []int) error {
	return routeReads(c, example, sel, b, held)
}

// Routed reports whether the reads of r's kind (r an
// *informers.KindReader[T]) are routed to held buckets (RouteReads), and
// the buckets they are cut into.
func Routed(r any) (sharding.Buckets, bool) { return routed(r) }

// Owed calls fn for every key q (a *workqueue.Queue[K]) still owes a
// worker: queued, held by a worker, or waiting out a delay, with the reason
// it is owed for. fn runs with the queue's lock held, so it must be quick
// and must not call the queue.
func Owed[K comparable](q any, fn func(k K, r reconcile.Reason)) { owed(q, fn) }
