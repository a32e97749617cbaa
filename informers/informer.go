package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ErrNotStarted is returned by reads and waits that gave up (at the sync
// timeout or when their context ended) before the cache's Start was called.
var ErrNotStarted = errors.New("informers: the cache has not been started")

// ErrStopped is wrapped by the error of a read that needs an informer that
// has not synced after the cache stopped (its Start's context ended): that
// informer will never run. It is also wrapped by the error of every read
// and AddListener through the handle of an informer stopped with
// Informer.Stop.
var ErrStopped = errors.New("informers: the cache has stopped")

// ErrNotCached is wrapped by the error of a read outside what the cache
// holds: an object in another namespace than the one the cache (or the
// kind's Selection) is limited to, which may well exist; from Cache.Get
// and KindReader.Get, an object that exists but is outside the labels or
// fields Options.ByKind narrows its kind to; and, for a kind whose reads
// are routed to buckets (as the framework routes a sharded controller's), an object of a bucket this
// process does not hold, or of a held bucket whose informer does not
// exist yet.
var ErrNotCached = errors.New("informers: outside what the cache holds")

// ErrNotWatched is wrapped by the error of a read of a kind no informer
// holds in the mode read, when Options.RefuseUnwatchedReads refuses to
// start one.
var ErrNotWatched = errors.New("informers: no informer holds the kind")

// ErrIndexExists is wrapped by the error of Informer.AddIndex when the
// informer already has an index of that name. Packages that add an index of
// their own under a name only they use (such as declarative's index of
// children by parent) may treat it as success.
var ErrIndexExists = errors.New("informers: an index of that name exists")

// Reader reads objects of one type from the shared cache.
//
// Objects returned are the cached objects themselves, shared with every other
// reader: do not modify them (DeepCopy first). Reads wait for the informer's
// initial list, bounded by the cache's SyncTimeout and ctx; they fail at once
// when the identity may not list or watch the kind (apierrors.IsForbidden is
// then true), since waiting would only wait for an RBAC change.
type Reader[T object.Object] interface {
	// Get returns the object, or an error for which apierrors.IsNotFound is
	// true when the cache holds no such object. When this process wrote the
	// object through a client that reports its writes (a client.Client
	// does), Get first waits for the cache to hold that write. An
	// object in a namespace the reader does not hold is an error wrapping
	// ErrNotCached, never a NotFound. A reader narrowed by labels or fields
	// answers for its selection, and asks nobody: NotFound means no such
	// object in the selection (Cache.Get confirms such a miss with the API
	// server).
	Get(ctx context.Context, key types.NamespacedName) (T, error)
	// List returns the objects matching every option, in no particular
	// order. Like Get, it first waits for the cache to hold this process's
	// writes of objects the list could show (in its namespace, matching its
	// label selectors); writes of objects outside the reader's field
	// selector are not waited for unless the reader holds them.
	List(ctx context.Context, opts ...ListOption) ([]T, error)
}

// Informer is a typed handle on one shared informer. Handles returned by For
// for equal selections share the informer, its store and its watch.
type Informer[T object.Object] struct {
	e *entry
}

var _ Reader[object.Object] = (*Informer[object.Object])(nil)

// For returns the informer for objects of Go type T and the given selection,
// creating it on first use. T is a pointer to a struct: a typed API object
// registered in the cache's scheme, *unstructured.Unstructured or
// *metav1.PartialObjectMetadata (the last two need sel.Kind).
//
// A zero Selection means the kind's default from Options.ByKind, or all
// objects of the kind in Options.Namespace.
func For[T object.Object](c *Cache, sel Selection) (*Informer[T], error) {
	obj, err := newObject[T]()
	if err != nil {
		return nil, err
	}
	e, err := c.lookup(obj, sel, true)
	if err != nil {
		return nil, err
	}
	return &Informer[T]{e: e}, nil
}

// ForObject is For for callers that know the Go type only at run time: the
// informer is chosen by example's dynamic type (and, for unstructured and
// metadata objects, sel.Kind or example's apiVersion and kind), and T may be
// an interface, such as object.Object, that example implements.
func ForObject[T object.Object](c *Cache, example T, sel Selection) (*Informer[T], error) {
	if err := typednil.Check("example", example); err != nil {
		return nil, fmt.Errorf("informers: ForObject: %w", err)
	}
	return forObject(c, example, sel, true)
}

func forObject[T object.Object](c *Cache, example T, sel Selection, pin bool) (*Informer[T], error) {
	if sel.Kind.Empty() && modeOf(example) != Typed {
		sel.Kind = example.GetObjectKind().GroupVersionKind()
	}
	e, err := c.lookup(example, sel, pin)
	if err != nil {
		return nil, err
	}
	return &Informer[T]{e: e}, nil
}

// Kind returns the informer's kind.
func (i *Informer[T]) Kind() schema.GroupVersionKind { return i.e.key.gvk }

// Namespace returns the namespace the informer is limited to (its
// Selection's, else Options.Namespace), or "" for all namespaces. Informers
// of cluster-scoped kinds hold every object whatever it returns.
func (i *Informer[T]) Namespace() string { return i.e.key.namespace }

// Selection returns what the informer holds: its kind, its namespace (as
// Namespace does), and its label, field and shard selectors, nil when it
// has none.
func (i *Informer[T]) Selection() Selection {
	sel := Selection{Kind: i.e.key.gvk, Namespace: i.e.key.namespace}
	if i.e.shardSel != nil {
		sel.Shard = i.e.shardSel.DeepCopySelector()
	}
	if i.e.key.labels != "" {
		sel.Labels, _ = labels.Parse(i.e.key.labels) // the String of a parsed selector
	}
	if i.e.key.fields != "" {
		sel.Fields, _ = fields.ParseSelector(i.e.key.fields)
	}
	return sel
}

// String describes the informer: its kind, and namespace and selectors if any.
func (i *Informer[T]) String() string { return i.e.desc }

// Stop stops the informer and removes it from the cache: its listeners get
// no more events, reads through this handle (and every other handle on the
// same informer) fail with an error wrapping ErrStopped, and For with the
// same Selection makes a new informer. Stop before the cache's Start means
// the informer never runs. Stopping twice is a no-op.
func (i *Informer[T]) Stop() {
	c := i.e.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[i.e.key] == i.e {
		delete(c.entries, i.e.key)
		c.wholeLocked(i.e, true)
	}
	i.e.stopped.Store(true)
	i.e.dropped.Store(true)
	if i.e.stop != nil {
		i.e.stop()
	}
}

// stoppedError is the error of a use of the handle after Stop, nil before.
func (i *Informer[T]) stoppedError() error {
	if !i.e.stopped.Load() {
		return nil
	}
	return fmt.Errorf("informers: %s was stopped (Informer.Stop): %w", i.e.desc, ErrStopped)
}

// HasSynced reports whether the informer has listed its objects once.
func (i *Informer[T]) HasSynced() bool { return i.e.informer.HasSynced() }

// Health is nil when the informer has synced and its last list or watch
// succeeded; otherwise a *SyncError naming the kind and the cause (an
// informer whose cache has not started yet is healthy).
func (i *Informer[T]) Health() error {
	i.e.cache.mu.Lock()
	started := i.e.cache.runCtx != nil
	i.e.cache.mu.Unlock()
	return i.e.health(started)
}

// Len returns the number of objects the informer holds, as
// InformerStats.Objects counts them: as its events reach listeners, so it
// may lag the store by the events not yet handed to them. It takes
// constant time.
func (i *Informer[T]) Len() int { return i.e.len() }

// Stats describes the informer as Cache.Stats does.
func (i *Informer[T]) Stats() InformerStats {
	i.e.cache.mu.Lock()
	started := i.e.cache.runCtx != nil
	i.e.cache.mu.Unlock()
	return i.e.stats(started)
}

// Contains reports whether the informer holds the object of key now,
// without waiting for a sync or for the manager's own writes.
func (i *Informer[T]) Contains(key types.NamespacedName) bool {
	return i.containsKey(storeKey(key))
}

// containsKey is Contains of a store key ("namespace/name", or "name").
func (i *Informer[T]) containsKey(k string) bool {
	_, ok, err := i.e.informer.GetIndexer().GetByKey(k)
	return ok && err == nil
}

// peek returns the object the informer holds for key now, and whether it
// holds one, without waiting for a sync or for the manager's own writes
// (Get waits for both, and says why an object is missing): for bookkeeping
// that must not block. After Stop, it reports what the informer held last,
// as Contains does. Like Get's, the object is shared: do not modify it.
func (i *Informer[T]) peek(key types.NamespacedName) (T, bool) {
	var zero T
	obj, ok, err := i.e.informer.GetIndexer().GetByKey(storeKey(key))
	if !ok || err != nil {
		return zero, false
	}
	t, err := i.typed(obj)
	return t, err == nil
}

// storeKey returns the key the informers' stores hold key's object under.
func storeKey(key types.NamespacedName) string {
	if key.Namespace == "" {
		return key.Name
	}
	return key.Namespace + "/" + key.Name
}

// WaitForSync waits for the initial list, bounded by the cache's SyncTimeout
// and ctx; the error names the kind and the cause.
func (i *Informer[T]) WaitForSync(ctx context.Context) error {
	err := i.e.cache.waitForSync(ctx, false, i.e)
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

// AddListener registers h to receive the informer's events. Objects passed to
// h are shared: do not modify them. A listener added after the initial list
// first receives every cached object as an add with isInInitialList true.
// Listeners are called from one goroutine per listener and must not block.
//
// opts.ResyncPeriod, when set, is the listener's own resync period: every
// cached object is replayed to h as an update with equal old and new
// resource versions at that interval (at least MinResyncPeriod; zero for
// none). Unset means the kind's period (Options.ResyncByKind, else
// Options.ResyncPeriod). Listeners with different periods share the
// informer; each is replayed to on its own schedule.
func (i *Informer[T]) AddListener(h Listener[T], opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	if err := typednil.Check("h", h); err != nil {
		return nil, fmt.Errorf("informers: add listener to %s: %w", i.e.desc, err)
	}
	if err := i.stoppedError(); err != nil {
		return nil, fmt.Errorf("add listener: %w", err)
	}
	if opts.ResyncPeriod == nil {
		d := i.e.resync
		opts.ResyncPeriod = &d
	} else if d := *opts.ResyncPeriod; d > 0 && d < MinResyncPeriod {
		return nil, fmt.Errorf("informers: add listener to %s: resync period %v is shorter than %v", i.e.desc, d, MinResyncPeriod)
	} else if d < 0 {
		return nil, fmt.Errorf("informers: add listener to %s: resync period %v is negative", i.e.desc, d)
	}
	n := new(atomic.Int64)
	reg, err := i.e.informer.AddEventHandlerWithOptions(untyped[T]{h: h, e: i.e, n: n}, opts)
	if err != nil {
		return nil, fmt.Errorf("informers: add listener to %s: %w", i.e.desc, err)
	}
	i.e.listenerAdded(reg, n)
	return reg, nil
}

// RemoveListener unregisters a listener added with AddListener.
func (i *Informer[T]) RemoveListener(reg cache.ResourceEventHandlerRegistration) error {
	if err := i.e.informer.RemoveEventHandler(reg); err != nil {
		return err
	}
	return i.e.listenerRemoved(reg)
}

// AddIndex adds a field index: fn returns the values obj is indexed under, and
// List(MatchingIndex(name, value)) returns the objects with that value. An
// object is indexed once per value, across namespaces: a List of one
// namespace's objects with a value reads every object with that value and
// keeps the namespace's. Index names are shared by every user of the
// informer; adding an existing name is an error wrapping ErrIndexExists.
func (i *Informer[T]) AddIndex(name string, fn func(obj T) []string) error {
	if err := typednil.Check("fn", fn); err != nil {
		return fmt.Errorf("informers: add index %q to %s: %w", name, i.e.desc, err)
	}
	i.e.indexMu.Lock()
	defer i.e.indexMu.Unlock()
	if _, ok := i.e.informer.GetIndexer().GetIndexers()[name]; ok {
		return fmt.Errorf("informers: add index %q to %s: %w", name, i.e.desc, ErrIndexExists)
	}
	err := i.e.informer.AddIndexers(cache.Indexers{name: func(obj any) ([]string, error) {
		t, err := as[T](i.e, obj)
		if err != nil {
			return nil, nil
		}
		// One key per value, the value itself: a query in one namespace
		// keeps the objects of that namespace among those of the value,
		// rather than every object being indexed twice (once per
		// namespace), which would double the index's memory.
		return fn(t), nil
	}})
	if err != nil {
		return fmt.Errorf("informers: add index %q to %s: %w", name, i.e.desc, err)
	}
	i.e.indexes.Add(1)
	return nil
}

// Get returns the cached object key. See Reader.
func (i *Informer[T]) Get(ctx context.Context, key types.NamespacedName) (T, error) {
	obj, err := i.stored(ctx, key)
	if err != nil {
		var zero T
		return zero, err
	}
	return i.typed(obj)
}

// stored is Get's object as the store holds it: a compact kind's record.
func (i *Informer[T]) stored(ctx context.Context, key types.NamespacedName) (any, error) {
	namespace, name, k := key.Namespace, key.Name, storeKey(key)
	if err := i.ready(ctx); err != nil {
		return nil, fmt.Errorf("get %s %s: %w", describe(i.e.key.gvk), k, err)
	}
	if err := i.e.inSelection("get", namespace, name); err != nil {
		return nil, err
	}
	if err := i.e.awaitOwnWrite(ctx, namespace, name); err != nil {
		return nil, err
	}
	obj, ok, err := i.e.informer.GetIndexer().GetByKey(k)
	if err != nil {
		return nil, fmt.Errorf("get %s %s from cache: %w", i.e.desc, k, err)
	}
	if !ok {
		return nil, apierrors.NewNotFound(i.groupResource(), name)
	}
	return obj, nil
}

// typed returns obj as a T, or an error naming both types when the cache
// holds another (see as).
func (i *Informer[T]) typed(obj any) (T, error) { return as[T](i.e, obj) }

// as returns obj, an object informer e holds, as a T, or an error naming
// both types when it is not a T or not of the Go type e's kind decodes as:
// only a Transform that breaks its rule (Options.Transform) puts such an
// object in the cache. A compact kind's record is decoded here, the one
// place records become objects, and the decoded object is kept (see
// CompactOptions.Decoded). Reads return the error; listeners are not
// called with obj, and the error is reported through client-go's error
// handlers (utilruntime.HandleError).
func as[T object.Object](e *entry, obj any) (T, error) { return asKept[T](e, obj, true) }

// asKept is as; keep says whether a record decoded now is kept decoded.
func asKept[T object.Object](e *entry, obj any, keep bool) (T, error) {
	if r, ok := obj.(*compactObject); ok {
		d, err := r.object(keep)
		if err != nil {
			var zero T
			return zero, fmt.Errorf("%s: %w", e.desc, err)
		}
		obj = d
	}
	t, ok := obj.(T)
	if ok && (e.goType == nil || reflect.TypeOf(obj) == e.goType) {
		return t, nil
	}
	want := e.goType
	if want == nil {
		want = reflect.TypeFor[T]()
	}
	what := fmt.Sprintf("%T", obj)
	if m, err := meta.Accessor(obj); err == nil {
		what = cache.MetaObjectToName(m).String() + " is a " + what
	}
	return t, fmt.Errorf("informers: %s: cached object %s, not %v: Options.Transform must return objects of the type it is given",
		e.desc, what, want)
}

// List returns the cached objects matching opts. See Reader.
func (i *Informer[T]) List(ctx context.Context, opts ...ListOption) ([]T, error) {
	return i.list(ctx, false, opts...)
}

// list is List; with own set, the objects are copies the caller owns (see
// owned).
func (i *Informer[T]) list(ctx context.Context, own bool, opts ...ListOption) ([]T, error) {
	if err := i.ready(ctx); err != nil {
		return nil, fmt.Errorf("list %s: %w", i.e.desc, err)
	}
	lo := NewListOptions(opts...)
	byFields, err := i.e.fieldMatcher(lo.Fields)
	if err != nil {
		return nil, err
	}
	if ns, ok := namespaceOf(lo.Fields); ok && lo.Namespace == "" {
		lo.Namespace = ns // read one namespace's index, and refuse one the cache does not hold
	}
	if lo.Namespace != "" {
		if err := i.e.inSelection("list", lo.Namespace, ""); err != nil {
			return nil, err
		}
	}
	if err := i.e.awaitOwnWrites(ctx, lo); err != nil {
		return nil, err
	}
	indexer := i.e.informer.GetIndexer()
	var objs []any
	switch {
	case lo.Index != "":
		objs, err = indexer.ByIndex(lo.Index, lo.Value)
	case lo.Namespace != "":
		objs, err = indexer.ByIndex(cache.NamespaceIndex, lo.Namespace)
	default:
		objs = indexer.List()
	}
	if err != nil {
		return nil, fmt.Errorf("list %s from cache: %w", i.e.desc, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		var t T
		if own {
			var obj runtime.Object
			if obj, err = owned(i.e, o); err == nil {
				t, err = asKept[T](i.e, obj, false)
			}
		} else {
			t, err = asKept[T](i.e, o, false) // a List does not push out the objects kept decoded
		}
		if err != nil {
			return nil, err
		}
		if lo.Index != "" && lo.Namespace != "" && t.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.Labels != nil && !lo.Labels.Matches(labels.Set(t.GetLabels())) {
			continue
		}
		if byFields != nil && !byFields(t) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// ready makes sure reads see a synced cache. A read of a kind the identity
// may not list or watch fails at the first forbidden request rather than at
// the sync timeout; an informer that only reads asked for is then dropped,
// so that it does not hold readiness down.
func (i *Informer[T]) ready(ctx context.Context) error {
	if i.e.stopped.Load() {
		return i.stoppedError()
	}
	if i.e.informer.HasSynced() {
		return nil
	}
	err := i.e.cache.waitForSync(ctx, true, i.e)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotStarted):
		return fmt.Errorf("wait for %s: %w", i.e.desc, err)
	case apierrors.IsForbidden(err):
		i.e.cache.dropUnpinned(i.e)
		what := i.e.resource()
		if what == "" {
			what = describe(i.e.key.gvk)
		}
		cause := err
		var se *SyncError
		if errors.As(err, &se) {
			cause = se.Cause // the API server's answer, which says who may not do what
		}
		return fmt.Errorf("this identity may not list and watch %s, which reads from the cache need: "+
			"grant list and watch in its RBAC role, or read it without the cache (the framework's Manager.APIReader): %w", what, cause)
	}
	return err
}

// inSelection fails reads of a namespace other than the one the informer
// holds: the cache does not hold the object, and a NotFound would say it
// does not exist.
func (e *entry) inSelection(verb, namespace, name string) error {
	if e.key.namespace == "" || namespace == e.key.namespace {
		return nil
	}
	if m := e.mapping.Load(); m != nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil // a kind without namespaces: the informer holds every object
	}
	what := namespace + "/" + name
	if name == "" {
		what = "in namespace " + namespace
	}
	return fmt.Errorf("%s %s %s: namespace %q is not cached, the cache holds namespace %q only (Options.Namespace or the kind's Selection): "+
		"read it without the cache (the framework's Manager.APIReader) or cache that namespace: %w",
		verb, describe(e.key.gvk), what, namespace, e.key.namespace, ErrNotCached)
}

func (i *Informer[T]) groupResource() schema.GroupResource {
	if m := i.e.mapping.Load(); m != nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: i.e.key.gvk.Group, Resource: i.e.key.gvk.Kind}
}
