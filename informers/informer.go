package informers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ErrNotStarted is returned by reads and waits that gave up (at the sync
// timeout or when their context ended) before the cache's Start was called.
var ErrNotStarted = errors.New("informers: the cache has not been started")

// Reader reads objects of one type from the shared cache.
//
// Objects returned are the cached objects themselves, shared with every other
// reader: do not modify them (DeepCopy first). Reads wait for the informer's
// initial list, bounded by the cache's SyncTimeout and ctx.
type Reader[T Object] interface {
	// Get returns the object, or an error for which apierrors.IsNotFound is
	// true when the cache holds no such object. When this process wrote the
	// object through a client that reports its writes (the framework's
	// client does), Get first waits for the cache to hold that write.
	Get(ctx context.Context, namespace, name string) (T, error)
	// List returns the objects matching every option, in no particular order.
	List(ctx context.Context, opts ...ListOption) ([]T, error)
}

// Informer is a typed handle on one shared informer. Handles returned by For
// for equal selections share the informer, its store and its watch.
type Informer[T Object] struct {
	e *entry
}

var _ Reader[Object] = (*Informer[Object])(nil)

// For returns the informer for objects of Go type T and the given selection,
// creating it on first use. T is a pointer to a struct: a typed API object
// registered in the cache's scheme, *unstructured.Unstructured or
// *metav1.PartialObjectMetadata (the last two need sel.Kind).
//
// A zero Selection means the kind's default from Options.ByKind, or all
// objects of the kind in Options.Namespace.
func For[T Object](c *Cache, sel Selection) (*Informer[T], error) {
	obj, err := newObject[T]()
	if err != nil {
		return nil, err
	}
	e, err := c.lookup(obj, sel)
	if err != nil {
		return nil, err
	}
	return &Informer[T]{e: e}, nil
}

// ForObject is For for callers that know the type only at run time: the
// informer is chosen by example's Go type (and, for unstructured and metadata
// objects, sel.Kind or example's apiVersion and kind).
func ForObject(c *Cache, example Object, sel Selection) (*Informer[Object], error) {
	if sel.Kind.Empty() && modeOf(example) != Typed {
		sel.Kind = example.GetObjectKind().GroupVersionKind()
	}
	e, err := c.lookup(example, sel)
	if err != nil {
		return nil, err
	}
	return &Informer[Object]{e: e}, nil
}

// Kind returns the informer's kind.
func (i *Informer[T]) Kind() schema.GroupVersionKind { return i.e.key.gvk }

// Namespace returns the namespace the informer is limited to (its
// Selection's, else Options.Namespace), or "" for all namespaces. Informers
// of cluster-scoped kinds hold every object whatever it returns.
func (i *Informer[T]) Namespace() string { return i.e.key.namespace }

// String describes the informer: its kind, and namespace and selectors if any.
func (i *Informer[T]) String() string { return i.e.desc }

// HasSynced reports whether the informer has listed its objects once.
func (i *Informer[T]) HasSynced() bool { return i.e.informer.HasSynced() }

// WaitForSync waits for the initial list, bounded by the cache's SyncTimeout
// and ctx; the error names the kind and the cause.
func (i *Informer[T]) WaitForSync(ctx context.Context) error {
	err := i.e.cache.waitForSync(ctx, i.e)
	if errors.Is(err, ErrNotStarted) {
		return fmt.Errorf("wait for %s: %w", i.e.desc, err)
	}
	return err // a *SyncError names the informer itself
}

// Relists returns how many times the informer has listed its objects: once to
// start and once more after each watch that could not resume.
func (i *Informer[T]) Relists() int64 { return i.e.lists.Load() }

// LastSyncResourceVersion returns the resource version of the last list or
// watch event the informer has processed.
func (i *Informer[T]) LastSyncResourceVersion() string {
	return i.e.informer.LastSyncResourceVersion()
}

// AddHandler registers h to receive the informer's events. Objects passed to
// h are shared: do not modify them. A handler added after the initial list
// first receives every cached object as an add with isInInitialList true.
// Handlers are called from one goroutine per handler and must not block.
func (i *Informer[T]) AddHandler(h Handler[T], opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.e.informer.AddEventHandlerWithOptions(untyped[T]{h}, opts)
	if err != nil {
		return nil, fmt.Errorf("informers: add handler to %s: %w", i.e.desc, err)
	}
	return reg, nil
}

// RemoveHandler unregisters a handler added with AddHandler.
func (i *Informer[T]) RemoveHandler(reg cache.ResourceEventHandlerRegistration) error {
	return i.e.informer.RemoveEventHandler(reg)
}

// allNamespaces is the namespace part of index keys that match across namespaces;
// "*" is not a valid namespace name.
const allNamespaces = "*"

// AddIndex adds a field index: fn returns the values obj is indexed under, and
// List(MatchingIndex(name, value)) returns the objects with that value. Index
// names are shared by every user of the informer; adding an existing name is
// an error.
func (i *Informer[T]) AddIndex(name string, fn func(obj T) []string) error {
	err := i.e.informer.AddIndexers(cache.Indexers{name: func(obj any) ([]string, error) {
		t, ok := obj.(T)
		if !ok {
			return nil, nil
		}
		values := fn(t)
		keys := make([]string, 0, 2*len(values))
		ns := t.GetNamespace()
		for _, v := range values {
			keys = append(keys, allNamespaces+"/"+v)
			if ns != "" {
				keys = append(keys, ns+"/"+v)
			}
		}
		return keys, nil
	}})
	if err != nil {
		return fmt.Errorf("informers: add index %q to %s: %w", name, i.e.desc, err)
	}
	return nil
}

// Get returns the cached object namespace/name. See Reader.
func (i *Informer[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	if err := i.ready(ctx); err != nil {
		return zero, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	if err := i.e.awaitOwnWrite(ctx, namespace, name, key); err != nil {
		return zero, err
	}
	obj, ok, err := i.e.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return zero, fmt.Errorf("get %s %s from cache: %w", i.e.desc, key, err)
	}
	if !ok {
		return zero, apierrors.NewNotFound(i.groupResource(), name)
	}
	return obj.(T), nil
}

// List returns the cached objects matching opts. See Reader.
func (i *Informer[T]) List(ctx context.Context, opts ...ListOption) ([]T, error) {
	if err := i.ready(ctx); err != nil {
		return nil, err
	}
	var lo listOptions
	for _, o := range opts {
		o(&lo)
	}
	indexer := i.e.informer.GetIndexer()
	var (
		objs []any
		err  error
	)
	switch {
	case lo.index != "":
		ns := lo.namespace
		if ns == "" {
			ns = allNamespaces
		}
		objs, err = indexer.ByIndex(lo.index, ns+"/"+lo.value)
	case lo.namespace != "":
		objs, err = indexer.ByIndex(cache.NamespaceIndex, lo.namespace)
	default:
		objs = indexer.List()
	}
	if err != nil {
		return nil, fmt.Errorf("list %s from cache: %w", i.e.desc, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t := o.(T)
		if lo.labels != nil && !lo.labels.Matches(labels.Set(t.GetLabels())) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// ready makes sure reads see a synced cache.
func (i *Informer[T]) ready(ctx context.Context) error {
	if i.e.informer.HasSynced() {
		return nil
	}
	return i.WaitForSync(ctx)
}

func (i *Informer[T]) groupResource() schema.GroupResource {
	if m := i.e.mapping.Load(); m != nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: i.e.key.gvk.Group, Resource: i.e.key.gvk.Kind}
}

// ListOption narrows a List.
type ListOption func(*listOptions)

type listOptions struct {
	namespace    string
	labels       labels.Selector
	index, value string
}

// InNamespace keeps objects in namespace ns.
func InNamespace(ns string) ListOption { return func(o *listOptions) { o.namespace = ns } }

// MatchingLabels keeps objects whose labels match sel.
func MatchingLabels(sel labels.Selector) ListOption {
	return func(o *listOptions) { o.labels = sel }
}

// MatchingIndex keeps objects indexed under value by the index named index
// (see Informer.AddIndex).
func MatchingIndex(index, value string) ListOption {
	return func(o *listOptions) { o.index, o.value = index, value }
}
