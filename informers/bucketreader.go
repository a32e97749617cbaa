package informers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// bucketReader reads one kind from the informers of the buckets a process holds,
// one informer per bucket, each made with Selection{Shard:
// Buckets.Selector(i)}: a Reader of the objects of the held buckets, with
// no informer of the whole kind. Cache.routeReads routes the cache's reads
// through one; the framework's sharded controllers read their primary kind
// through another.
//
// With sharding.ByNamespace, a read in one namespace goes to the one bucket of
// that namespace. With sharding.ByUID, the bucket cannot be told from a key, so
// Get looks in each held bucket's informer in turn. A bucketReader is safe for
// concurrent use.
type bucketReader[T object.Object] struct {
	kind    schema.GroupVersionKind
	buckets sharding.Buckets
	held    func() map[int]*Informer[T]
}

var _ Reader[object.Object] = (*bucketReader[object.Object])(nil)

// newBucketReader returns the bucketReader of kind, cut into buckets by b. held returns
// the buckets held now, each with its informer, or nil while the bucket has
// none (not made yet, or stopped). It is called on every read, so it must
// be fast and safe for concurrent use, and the map it returns is only read.
func newBucketReader[T object.Object](kind schema.GroupVersionKind, b sharding.Buckets, held func() map[int]*Informer[T]) (*bucketReader[T], error) {
	switch err := b.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("informers: bucket reader of %s: %w", describe(kind), err)
	case held == nil:
		return nil, fmt.Errorf("informers: bucket reader of %s: held is nil", describe(kind))
	case kind.Kind == "":
		return nil, fmt.Errorf("informers: bucket reader of %v: the kind is empty", kind)
	}
	return &bucketReader[T]{kind: kind, buckets: b, held: held}, nil
}

// Get returns the object of key from the informer of its held bucket. When
// its bucket is not held the error wraps ErrNotCached (sharding.ByNamespace,
// where the bucket is known) or is a NotFound (sharding.ByUID, where it is
// not), and names the held buckets; a bucket held without an informer yet
// answers an error wrapping ErrNotCached, as does a Get by UID while no
// bucket is held.
func (s *bucketReader[T]) Get(ctx context.Context, key types.NamespacedName) (T, error) {
	obj, _, err := s.get(ctx, key)
	return obj, err
}

// get is Get, and also returns the informer that answered (nil when none
// did), whose selection a miss may have to be confirmed against.
func (s *bucketReader[T]) get(ctx context.Context, key types.NamespacedName) (T, *Informer[T], error) {
	var zero T
	held, err := s.heldBuckets("get")
	if err != nil {
		return zero, nil, err
	}
	what := "get " + describe(s.kind) + " " + cache.NewObjectName(key.Namespace, key.Name).String()
	if s.buckets.By == sharding.ByNamespace {
		b := s.buckets.Of(key.Namespace)
		inf, ok := held[b]
		switch {
		case !ok:
			return zero, nil, fmt.Errorf("%s: namespace %q is in bucket %d, and %s: read it without the cache (the framework's Manager.APIReader): %w",
				what, key.Namespace, b, s.describeHeld(held), ErrNotCached)
		case inf == nil:
			return zero, nil, fmt.Errorf("%s: namespace %q is in bucket %d, which is held, but has no informer yet (For with Selection{Shard: Buckets.Selector(%d)}): %w",
				what, key.Namespace, b, b, ErrNotCached)
		}
		obj, err := inf.Get(ctx, key)
		return obj, inf, err
	}
	if len(held) == 0 {
		return zero, nil, fmt.Errorf("%s: no bucket of %d by %s is held: %w", what, s.buckets.Count, s.buckets.By, ErrNotCached)
	}
	k := storeKey(key)
	for _, inf := range held {
		if inf != nil && inf.containsKey(k) {
			obj, err := inf.Get(ctx, key)
			return obj, inf, err
		}
	}
	// In none yet: ask each, which waits for this process's own writes.
	var missing []int
	gr := schema.GroupResource{Group: s.kind.Group, Resource: s.kind.Kind}
	for _, b := range sortedBuckets(held) {
		inf := held[b]
		if inf == nil {
			missing = append(missing, b)
			continue
		}
		gr = inf.groupResource()
		obj, err := inf.Get(ctx, key)
		if !apierrors.IsNotFound(err) {
			return obj, inf, err
		}
	}
	note := ""
	if len(missing) > 0 {
		note = fmt.Sprintf(", and held buckets %v have no informer yet", missing)
	}
	return zero, nil, fmt.Errorf("%s: not in the informers of the held buckets; its bucket cannot be told by name, %s%s: %w",
		what, s.describeHeld(held), note, apierrors.NewNotFound(gr, key.Name))
}

// List returns the objects of the held buckets matching opts; with
// sharding.ByNamespace and one namespace asked, of that namespace's bucket
// only. It fails with an error wrapping ErrNotCached when a bucket it must
// read is not held or has no informer yet.
func (s *bucketReader[T]) List(ctx context.Context, opts ...ListOption) ([]T, error) {
	objs, _, err := s.list(ctx, opts)
	return objs, err
}

// list is List, and also returns the newest resource version of the
// informers it read.
func (s *bucketReader[T]) list(ctx context.Context, opts []ListOption) ([]T, string, error) {
	held, err := s.heldBuckets("list")
	if err != nil {
		return nil, "", err
	}
	what := "list " + describe(s.kind)
	buckets := sortedBuckets(held)
	if s.buckets.By == sharding.ByNamespace {
		lo := NewListOptions(opts...)
		ns := lo.Namespace
		if fns, ok := namespaceOf(lo.Fields); ok && ns == "" {
			ns = fns
		}
		if ns != "" {
			b := s.buckets.Of(ns)
			if _, ok := held[b]; !ok {
				return nil, "", fmt.Errorf("%s in namespace %s: the namespace is in bucket %d, and %s: read it without the cache (the framework's Manager.APIReader): %w",
					what, ns, b, s.describeHeld(held), ErrNotCached)
			}
			buckets = []int{b}
		}
	}
	var (
		out    []T
		newest uint64
		rv     string
	)
	for _, b := range buckets {
		inf := held[b]
		if inf == nil {
			return nil, "", fmt.Errorf("%s: bucket %d is held, but has no informer yet (For with Selection{Shard: Buckets.Selector(%d)}): %w",
				what, b, b, ErrNotCached)
		}
		objs, err := inf.List(ctx, opts...)
		if err != nil {
			return nil, "", err
		}
		out = append(out, objs...)
		v := inf.LastSyncResourceVersion()
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n >= newest {
			newest, rv = n, v
		} else if rv == "" {
			rv = v
		}
	}
	return out, rv, nil
}

// BucketOf returns the bucket of the object of key, when it can be told:
// from the namespace with sharding.ByNamespace; with sharding.ByUID, the held
// bucket whose informer holds the object.
func (s *bucketReader[T]) BucketOf(key types.NamespacedName) (int, bool) {
	if s.buckets.By == sharding.ByNamespace {
		return s.buckets.Of(key.Namespace), true
	}
	k := storeKey(key)
	for b, inf := range s.held() {
		if inf != nil && inf.containsKey(k) {
			return b, true
		}
	}
	return 0, false
}

// heldBuckets returns what held returns, or an error naming a bucket
// outside 0..Count-1.
func (s *bucketReader[T]) heldBuckets(verb string) (map[int]*Informer[T], error) {
	held := s.held()
	for b := range held {
		if b < 0 || b >= s.buckets.Count {
			return nil, fmt.Errorf("informers: %s %s: held bucket %d is not in 0..%d", verb, describe(s.kind), b, s.buckets.Count-1)
		}
	}
	return held, nil
}

// describeHeld names the held buckets for errors.
func (s *bucketReader[T]) describeHeld(held map[int]*Informer[T]) string {
	return fmt.Sprintf("only buckets %v of %d by %s are held", sortedBuckets(held), s.buckets.Count, s.buckets.By)
}

func sortedBuckets[V any](held map[int]V) []int {
	return slices.Sorted(maps.Keys(held))
}
