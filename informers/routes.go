package informers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// shardRoute is where Cache.Get, Cache.List and KindReader send the reads
// routeReads routes: to the informers of the held buckets.
type shardRoute struct {
	b    sharding.Buckets
	held func() []int
	// shards is the shard selector String of each bucket, as informer keys
	// hold it.
	shards []string
	// whole is the informer of the route's own key (its selection without
	// a shard), while the cache holds one: reads go to it instead, as it
	// holds every bucket's objects. It is written with the cache's mu held.
	whole atomic.Pointer[entry]
}

// routeReads routes the reads of objects like example (its kind and mode:
// typed, unstructured or metadata) in selection sel through the cache
// (Cache.Get, Cache.List, KindReader, and so the reads of clients built on
// the cache) to the informers of the buckets held() returns, which the
// caller made with For or ForObject and sel with Shard: b.Selector(i). A
// read that names no selection reads the kind's default one
// (Options.ByKind, else Options.Namespace), so sel is usually
// Selection{Kind: kind}: reads of another mode or selection are not
// routed. No informer of the whole kind is made for routed reads.
//
// With sharding.ByNamespace, Get and List in one namespace read the one bucket
// of that namespace; with sharding.ByUID, Get looks in every held bucket's
// informer. A read of an object whose bucket is not held (or whose held
// bucket's informer does not exist yet) answers with an error wrapping
// ErrNotCached, naming the kind, the object and the held buckets. By UID,
// where the bucket cannot be told from the name, a miss in every held
// bucket is confirmed with the API server (one GET of the object's
// metadata): NotFound when the server has no such object, or when its
// bucket is held (the cache has not seen it yet), else ErrNotCached naming
// its bucket. List merges the held buckets' informers, and fails with an
// error wrapping ErrNotCached when one of them does not exist yet.
//
// While the cache holds an informer of sel itself (one made to read the
// whole kind, such as the source of a controller that is not sharded),
// reads go to it instead: it holds every bucket's objects. routeReads
// replaces an earlier route of the same kind, mode and selection; held must
// be safe for concurrent use and fast (called on every read).
func (c *Cache) routeReads(example object.Object, sel Selection, b sharding.Buckets, held func() []int) error {
	if err := typednil.Check("example", example); err != nil {
		return fmt.Errorf("informers: routeReads: %w", err)
	}
	if sel.Kind.Empty() && modeOf(example) != Typed {
		sel.Kind = example.GetObjectKind().GroupVersionKind()
	}
	key, _, err := c.keyFor(example, sel)
	if err != nil {
		return fmt.Errorf("informers: routeReads: %w", err)
	}
	key.shard = ""
	switch err := b.Validate(); {
	case err != nil:
		return fmt.Errorf("informers: routeReads of %s: %w", key.describe(), err)
	case held == nil:
		return fmt.Errorf("informers: routeReads of %s: held is nil", key.describe())
	}
	r := &shardRoute{b: b, held: held, shards: make([]string, b.Count)}
	for i := range r.shards {
		r.shards[i] = b.Selector(i).String()
	}
	c.routesMu.Lock()
	defer c.routesMu.Unlock()
	next := map[informerKey]*shardRoute{key: r}
	if old := c.routes.Load(); old != nil {
		for k, v := range *old {
			if k != key {
				next[k] = v
			}
		}
	}
	// With mu held, so that an informer of key made meanwhile is seen
	// (lookup sets whole with mu held).
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		r.whole.Store(e)
	}
	c.routes.Store(&next)
	return nil
}

// errRouted is the answer of a lookup that would make an informer of a
// selection routeReads routes for a read: the read goes to the buckets.
var errRouted = errors.New("informers: reads of this selection go to its buckets")

// wholeLocked records e, just made or just forgotten (gone), as the
// informer a route of its key reads instead of its buckets. c.mu must be
// held.
func (c *Cache) wholeLocked(e *entry, gone bool) {
	routes := c.routes.Load()
	if routes == nil || e.key.shard != "" {
		return
	}
	r := (*routes)[e.key]
	switch {
	case r == nil:
	case gone:
		r.whole.CompareAndSwap(e, nil)
	default:
		r.whole.Store(e)
	}
}

// routeFor returns the route of obj's kind while its reads go to the held
// buckets (see route), and the key of the kind's default selection.
// Without any route it costs one atomic load.
func (c *Cache) routeFor(obj object.Object) (*shardRoute, informerKey, bool) {
	if c.routes.Load() == nil {
		return nil, informerKey{}, false
	}
	gvk, err := kindFor(c.opts.Scheme, obj, kindOf(obj))
	if err != nil {
		return nil, informerKey{}, false // the read without a route reports it
	}
	base, _ := c.keyOfKind(gvk, modeOf(obj), Selection{Kind: gvk})
	r := c.route(base)
	return r, base, r != nil
}

// route returns the route of base, the key of a read's selection, while
// reads of it go to the held buckets: routeReads routes it, and the cache
// holds no informer of base itself. Without any route it costs one atomic
// load.
func (c *Cache) route(base informerKey) *shardRoute {
	if r := c.routed(base); r != nil && r.whole.Load() == nil {
		return r
	}
	return nil
}

// routed returns the route of base, whether or not reads go to it now.
func (c *Cache) routed(base informerKey) *shardRoute {
	routes := c.routes.Load()
	if routes == nil {
		return nil
	}
	return (*routes)[base]
}

// kindOf is the Selection.Kind a read of obj asks for: obj's own for
// unstructured and metadata objects, none for typed ones.
func kindOf(obj object.Object) schema.GroupVersionKind {
	if modeOf(obj) == Typed {
		return schema.GroupVersionKind{}
	}
	return obj.GetObjectKind().GroupVersionKind()
}

// heldReader returns the bucketReader a read of base's kind goes to: the held
// buckets, each with the informer a caller made of it, if any.
func (c *Cache) heldReader(base informerKey, r *shardRoute) *bucketReader[object.Object] {
	return &bucketReader[object.Object]{kind: base.gvk, buckets: r.b, held: func() map[int]*Informer[object.Object] {
		bs := r.held()
		held := make(map[int]*Informer[object.Object], len(bs))
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range bs {
			if b < 0 || b >= r.b.Count {
				held[b] = nil // refused by the read, naming it
				continue
			}
			key := base
			key.shard = r.shards[b]
			if e := c.entries[key]; e != nil {
				held[b] = &Informer[object.Object]{e: e}
			} else {
				held[b] = nil
			}
		}
		return held
	}}
}

// routedGet is Cache.Get of a kind routed to its buckets.
func (c *Cache) routedGet(ctx context.Context, r *shardRoute, base informerKey, key types.NamespacedName, into object.Object) error {
	obj, inf, err := c.routedRead(ctx, r, base, key)
	if err != nil {
		return err
	}
	return copyInto(obj.DeepCopyObject(), into, inf.Kind())
}

// confirmShardMiss answers a Get of a kind sharded by UID that no held
// bucket's informer holds, by asking the API server for the object's
// metadata: notFound when the server has no such object, or when its
// bucket is held (the bucket's informer lags), else an error wrapping
// ErrNotCached naming its bucket.
func (c *Cache) confirmShardMiss(ctx context.Context, gvk schema.GroupVersionKind, r *shardRoute, key types.NamespacedName, notFound error) error {
	what := "get " + describe(gvk) + " " + cache.NewObjectName(key.Namespace, key.Name).String()
	m, err := c.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: no held bucket's informer holds it, and asking the API server failed: map the kind to a resource: %w: %w", what, err, ErrNotCached)
	}
	res := c.meta.Resource(m.Resource)
	var live *metav1.PartialObjectMetadata
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		live, err = res.Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	} else {
		live, err = res.Get(ctx, key.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return notFound
	case err != nil:
		return fmt.Errorf("%s: no held bucket's informer holds it, and asking the API server whether it exists failed: %w: %w", what, ErrNotCached, err)
	}
	held := slices.Clone(r.held())
	b := r.b.OfObject(live)
	if slices.Contains(held, b) {
		return notFound
	}
	slices.Sort(held)
	return fmt.Errorf("%s: it exists, in bucket %d, and the cache holds buckets %v of %d by %s only (its reads are routed to the held buckets): read it without the cache (the framework's Manager.APIReader): %w",
		what, b, held, r.b.Count, r.b.By, ErrNotCached)
}

// routedList is Cache.List of a kind routed to its buckets: the objects of
// the buckets the list can show, its kind, and the newest resource version
// of their informers.
func (c *Cache) routedList(ctx context.Context, r *shardRoute, base informerKey, opts []ListOption) ([]object.Object, schema.GroupVersionKind, string, error) {
	objs, rv, err := c.heldReader(base, r).list(ctx, opts)
	return objs, base.gvk, rv, err
}
