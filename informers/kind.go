package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// AddIndex adds a field index to every informer of kind the cache holds,
// whatever its selection and mode, and to every one it makes later, such as
// the informers of a sharded kind's buckets: fn returns the values obj is
// indexed under, and List(MatchingIndex(name, value)) on any of them
// returns the objects with that value, as with Informer.AddIndex. A name
// the kind already has, or one of its informers has (every informer has
// the cache's own index of namespaces, "namespace"), is an error wrapping
// ErrIndexExists.
func (c *Cache) AddIndex(kind schema.GroupKind, name string, fn func(obj object.Object) []string) error {
	what := fmt.Sprintf("informers: add index %q to kind %v", name, kind)
	if err := typednil.Check("fn", fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	index := cache.Indexers{name: func(obj any) ([]string, error) {
		if r, ok := obj.(*compactObject); ok {
			d, err := r.object(true) // kept by the transform when it stored r
			if err != nil {
				return nil, nil
			}
			obj = d
		}
		o, ok := obj.(object.Object)
		if !ok {
			return nil, nil
		}
		return fn(o), nil // one key per value, as Informer.AddIndex
	}}
	entries, err := c.recordIndex(kind, name, index)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// The informers there already are indexed without c.mu held, which
	// reads take: indexing goes through every object. Those made from now
	// on get the index when they are made.
	var errs []error
	for _, e := range entries {
		e.indexMu.Lock()
		err := e.informer.AddIndexers(index)
		e.indexMu.Unlock()
		if err == nil {
			e.indexes.Add(1)
		}
		if err != nil && !e.dropped.Load() { // a stopped informer is read no more
			errs = append(errs, fmt.Errorf("%s: %s: %w", what, e.desc, err))
		}
	}
	return errors.Join(errs...)
}

// recordIndex records index, named name, as kind's, for the informers made
// from now on, and returns the informers of kind there are now; an error
// wrapping ErrIndexExists when kind or one of them has the name (then
// nothing is recorded). The informers' names are read without c.mu held:
// an Informer.AddIndex indexing every object holds the informer's indexMu
// meanwhile.
func (c *Cache) recordIndex(kind schema.GroupKind, name string, index cache.Indexers) ([]*entry, error) {
	if name == cache.NamespaceIndex {
		return nil, fmt.Errorf("%w: the name %q is the cache's own index of namespaces", ErrIndexExists, name)
	}
	c.mu.Lock()
	if _, ok := c.indexes[kind][name]; ok {
		c.mu.Unlock()
		return nil, ErrIndexExists
	}
	if c.indexes == nil {
		c.indexes = map[schema.GroupKind]cache.Indexers{}
	}
	if c.indexes[kind] == nil {
		c.indexes[kind] = cache.Indexers{}
	}
	c.indexes[kind][name] = index[name]
	var entries []*entry
	for key, e := range c.entries {
		if key.gvk.GroupKind() == kind {
			entries = append(entries, e)
		}
	}
	c.mu.Unlock()
	for _, e := range entries {
		e.indexMu.Lock()
		_, ok := e.informer.GetIndexer().GetIndexers()[name]
		e.indexMu.Unlock()
		if ok {
			c.mu.Lock()
			delete(c.indexes[kind], name)
			c.mu.Unlock()
			return nil, fmt.Errorf("%s has it: %w", e.desc, ErrIndexExists)
		}
	}
	return entries, nil
}

// KindReader reads one kind from a Cache as Cache.Get and Cache.List do:
// from the informer of the kind's default selection (Options.ByKind, else
// Options.Namespace), made on first read, or from the informers of the held
// buckets while the kind's reads are routed to them (as the framework routes a sharded controller's). Unlike
// Cache.Get and Cache.List it hands out the cached objects themselves, as
// Informer.Get does: shared and read-only. A KindReader is safe for
// concurrent use.
type KindReader[T object.Object] struct {
	c       *Cache
	example T
	sel     Selection // the kind's default selection
	base    informerKey
	// inf is the informer of sel, once a read made it; reads make a new
	// one once it was stopped or dropped.
	inf atomic.Pointer[Informer[T]]
}

var _ Reader[object.Object] = (*KindReader[object.Object])(nil)

// NewKindReader returns the KindReader of the kind of example (kind, when
// set, for unstructured and metadata objects). It makes no informer.
func NewKindReader[T object.Object](c *Cache, example T, kind schema.GroupVersionKind) (*KindReader[T], error) {
	if typednil.Is(example) {
		return nil, fmt.Errorf("informers: kind reader of %v: example is nil", kind)
	}
	key, sel, err := c.keyFor(example, Selection{Kind: kind})
	if err != nil {
		return nil, err
	}
	sel.Kind = key.gvk
	return &KindReader[T]{c: c, example: example, sel: sel, base: key}, nil
}

// Selection returns the kind's default selection, with its Kind set: what
// the reader reads while the kind's reads are not routed to buckets.
func (k *KindReader[T]) Selection() Selection { return k.sel }

// routed reports whether routeReads routes the kind's reads to the
// informers of held buckets (a sharded controller reads it per held
// bucket), and how the kind is cut into buckets. It does not change once
// true. Reads still go to the informer of the whole kind while the cache
// holds one (someone reads the whole kind), which holds every bucket's
// objects.
func (k *KindReader[T]) routed() (sharding.Buckets, bool) {
	if r := k.c.routed(k.base); r != nil {
		return r.b, true
	}
	return sharding.Buckets{}, false
}

// Get returns the cached object key. See Reader.
func (k *KindReader[T]) Get(ctx context.Context, key types.NamespacedName) (T, error) {
	var zero T
	if r := k.c.route(k.base); r != nil {
		obj, inf, err := k.c.routedRead(ctx, r, k.base, key)
		if err != nil {
			return zero, err
		}
		return as[T](inf.e, obj)
	}
	inf, err := k.informer()
	if errors.Is(err, errRouted) {
		return k.Get(ctx, key) // the route's whole informer went away
	}
	if err != nil {
		return zero, err
	}
	obj, err := inf.Get(ctx, key)
	if err != nil {
		return zero, k.c.confirmMiss(ctx, inf.e, key.Namespace, key.Name, err)
	}
	return obj, nil
}

// List returns the cached objects matching opts. See Reader.
func (k *KindReader[T]) List(ctx context.Context, opts ...ListOption) ([]T, error) {
	if r := k.c.route(k.base); r != nil {
		objs, _, err := k.c.heldReader(k.base, r).list(ctx, opts)
		if err != nil {
			return nil, err
		}
		out := make([]T, 0, len(objs))
		for _, o := range objs {
			t, ok := o.(T)
			if !ok {
				return nil, fmt.Errorf("list %s from its held buckets: the cache holds a %T, not a %v", describe(k.base.gvk), o, reflect.TypeFor[T]())
			}
			out = append(out, t)
		}
		return out, nil
	}
	inf, err := k.informer()
	if errors.Is(err, errRouted) {
		return k.List(ctx, opts...) // the route's whole informer went away
	}
	if err != nil {
		return nil, err
	}
	return inf.List(ctx, opts...)
}

// informer returns the informer of the kind's default selection, making
// it on first use and again once it was stopped or dropped.
func (k *KindReader[T]) informer() (*Informer[T], error) {
	if inf := k.inf.Load(); inf != nil && !inf.e.dropped.Load() {
		return inf, nil
	}
	inf, err := forObject(k.c, k.example, k.sel, false)
	if err != nil {
		return nil, err
	}
	k.inf.Store(inf)
	return inf, nil
}

// routedRead reads key from the held buckets of r, and confirms a miss
// that the buckets cannot tell from an object outside them (see
// routeReads). inf is the informer that answered.
func (c *Cache) routedRead(ctx context.Context, r *shardRoute, base informerKey, key types.NamespacedName) (object.Object, *Informer[object.Object], error) {
	obj, inf, err := c.heldReader(base, r).get(ctx, key)
	switch {
	case !apierrors.IsNotFound(err):
	case inf == nil: // by UID: in none of the held buckets
		return nil, nil, c.confirmShardMiss(ctx, base.gvk, r, key, err)
	default:
		return nil, nil, c.confirmMiss(ctx, inf.e, key.Namespace, key.Name, err)
	}
	return obj, inf, err
}
