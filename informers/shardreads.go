package informers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/converge-dev/converge/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// shardRoute is where Cache.Get and Cache.List send the reads of a kind
// ShardReads routes: to the informers of the held buckets.
type shardRoute struct {
	b    Buckets
	held func() []int
	// shards is the shard selector String of each bucket, as informer keys
	// hold it.
	shards []string
}

// ShardReads routes Cache.Get and Cache.List of kind gk (and so the reads of
// clients built on the cache) to the informers of the buckets held()
// returns, which the caller created with For/ForObject and
// Selection{Shard: b.Selector(i)} (otherwise the kind's default selection):
// no informer of the whole kind is made for them.
//
// With ShardByNamespace, Get and List in one namespace read the one bucket
// of that namespace; with ShardByUID, Get looks in every held bucket's
// informer. A read of an object whose bucket is not held (or whose held
// bucket's informer does not exist yet) answers with an error wrapping
// ErrNotCached (for Get by namespace) or NotFound (Get by UID, where the
// bucket cannot be known), naming the kind, the object and the held
// buckets. List merges the held buckets' informers, and fails with an
// error wrapping ErrNotCached when one of them does not exist yet.
// ShardReads replaces an earlier route for gk; held must be safe for
// concurrent use and fast (called on every read).
func (c *Cache) ShardReads(gk schema.GroupKind, b Buckets, held func() []int) error {
	switch err := b.validate(); {
	case err != nil:
		return fmt.Errorf("informers: ShardReads of %v: %w", gk, err)
	case held == nil:
		return fmt.Errorf("informers: ShardReads of %v: held is nil", gk)
	case gk.Kind == "":
		return fmt.Errorf("informers: ShardReads of %v: the kind is empty", gk)
	}
	r := &shardRoute{b: b, held: held, shards: make([]string, b.Count)}
	for i := range r.shards {
		r.shards[i] = b.Selector(i).String()
	}
	c.routesMu.Lock()
	defer c.routesMu.Unlock()
	next := map[schema.GroupKind]*shardRoute{gk: r}
	if old := c.routes.Load(); old != nil {
		for k, v := range *old {
			if k != gk {
				next[k] = v
			}
		}
	}
	c.routes.Store(&next)
	return nil
}

// routeFor returns the route of obj's kind, if ShardReads set one. Without
// any route it costs one atomic load.
func (c *Cache) routeFor(obj object.Object) (*shardRoute, bool) {
	routes := c.routes.Load()
	if routes == nil {
		return nil, false
	}
	gvk, err := kindFor(c.opts.Scheme, obj, kindOf(obj))
	if err != nil {
		return nil, false // the read without a route reports it
	}
	r, ok := (*routes)[gvk.GroupKind()]
	return r, ok
}

// kindOf is the Selection.Kind a read of obj asks for: obj's own for
// unstructured and metadata objects, none for typed ones.
func kindOf(obj object.Object) schema.GroupVersionKind {
	if modeOf(obj) == Typed {
		return schema.GroupVersionKind{}
	}
	return obj.GetObjectKind().GroupVersionKind()
}

// heldBuckets returns the buckets r's held returns, sorted, without
// duplicates, or an error naming one outside 0..Count-1.
func (r *shardRoute) heldBuckets(gvk schema.GroupVersionKind) ([]int, error) {
	held := slices.Clone(r.held())
	slices.Sort(held)
	held = slices.Compact(held)
	for _, b := range held {
		if b < 0 || b >= r.b.Count {
			return nil, fmt.Errorf("informers: read %s: ShardReads' held returned bucket %d, not in 0..%d", describe(gvk), b, r.b.Count-1)
		}
	}
	return held, nil
}

// describeHeld names the held buckets for errors.
func (r *shardRoute) describeHeld(held []int) string {
	return fmt.Sprintf("the cache holds buckets %v of %d by %s only (Cache.ShardReads)", held, r.b.Count, r.b.Field)
}

// shardEntry returns the informer of bucket for base, the key of the kind's
// default selection; nil when nobody has created it (or it was stopped).
func (c *Cache) shardEntry(base informerKey, r *shardRoute, bucket int) *entry {
	base.shard = r.shards[bucket]
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[base]
}

// routedGet is Cache.Get of a kind routed to its buckets.
func (c *Cache) routedGet(ctx context.Context, r *shardRoute, key types.NamespacedName, into object.Object) error {
	base, _, err := c.keyFor(into, Selection{Kind: kindOf(into)})
	if err != nil {
		return err
	}
	held, err := r.heldBuckets(base.gvk)
	if err != nil {
		return err
	}
	what := "get " + describe(base.gvk) + " " + cache.NewObjectName(key.Namespace, key.Name).String()
	if r.b.Field == ShardByNamespace {
		bucket := r.b.Of(key.Namespace)
		if !slices.Contains(held, bucket) {
			return fmt.Errorf("%s: namespace %q is in bucket %d, and %s: read it without the cache (the framework's Manager.APIReader): %w",
				what, key.Namespace, bucket, r.describeHeld(held), ErrNotCached)
		}
		e := c.shardEntry(base, r, bucket)
		if e == nil {
			return fmt.Errorf("%s: namespace %q is in bucket %d, which is held, but its informer (For with Selection{Shard: Buckets.Selector(%d)}) does not exist: %w",
				what, key.Namespace, bucket, bucket, ErrNotCached)
		}
		inf := &Informer[object.Object]{e: e}
		obj, err := inf.Get(ctx, key)
		if apierrors.IsNotFound(err) && (e.key.labels != "" || e.key.fields != "") {
			return c.confirmMiss(ctx, e, key.Namespace, key.Name, err)
		}
		if err != nil {
			return err
		}
		return copyInto(obj.DeepCopyObject(), into, inf.Kind())
	}
	var missing []int
	gr := schema.GroupResource{Group: base.gvk.Group, Resource: base.gvk.Kind}
	for _, b := range held {
		e := c.shardEntry(base, r, b)
		if e == nil {
			missing = append(missing, b)
			continue
		}
		inf := &Informer[object.Object]{e: e}
		gr = inf.groupResource()
		obj, err := inf.Get(ctx, key)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		return copyInto(obj.DeepCopyObject(), into, inf.Kind())
	}
	note := ""
	if len(missing) > 0 {
		note = fmt.Sprintf(", and the informers of held buckets %v do not exist", missing)
	}
	return fmt.Errorf("%s: not in the informers of the held buckets; its bucket cannot be told by name, %s%s: %w",
		what, r.describeHeld(held), note, apierrors.NewNotFound(gr, key.Name))
}

// routedList is Cache.List of a kind routed to its buckets: the objects of
// the buckets the list can show, its kind, and the newest resource version
// of their informers.
func (c *Cache) routedList(ctx context.Context, r *shardRoute, item object.Object, opts []ListOption) ([]object.Object, schema.GroupVersionKind, string, error) {
	base, _, err := c.keyFor(item, Selection{Kind: kindOf(item)})
	if err != nil {
		return nil, schema.GroupVersionKind{}, "", err
	}
	held, err := r.heldBuckets(base.gvk)
	if err != nil {
		return nil, base.gvk, "", err
	}
	what := "list " + describe(base.gvk)
	buckets := held
	if r.b.Field == ShardByNamespace {
		lo := NewListOptions(opts...)
		ns := lo.Namespace
		if fns, ok := namespaceOf(lo.Fields); ok && ns == "" {
			ns = fns
		}
		if ns != "" {
			bucket := r.b.Of(ns)
			if !slices.Contains(held, bucket) {
				return nil, base.gvk, "", fmt.Errorf("%s in namespace %s: the namespace is in bucket %d, and %s: read it without the cache (the framework's Manager.APIReader): %w",
					what, ns, bucket, r.describeHeld(held), ErrNotCached)
			}
			buckets = []int{bucket}
		}
	}
	var (
		out    []object.Object
		newest uint64
		rv     string
		errs   []error
	)
	for _, b := range buckets {
		e := c.shardEntry(base, r, b)
		if e == nil {
			errs = append(errs, fmt.Errorf("%s: bucket %d is held, but its informer (For with Selection{Shard: Buckets.Selector(%d)}) does not exist: %w",
				what, b, b, ErrNotCached))
			continue
		}
		inf := &Informer[object.Object]{e: e}
		objs, err := inf.List(ctx, opts...)
		if err != nil {
			return nil, base.gvk, "", err
		}
		out = append(out, objs...)
		v := inf.LastSyncResourceVersion()
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n >= newest {
			newest, rv = n, v
		} else if rv == "" {
			rv = v
		}
	}
	if len(errs) > 0 {
		return nil, base.gvk, "", errors.Join(errs...)
	}
	return out, base.gvk, rv, nil
}
