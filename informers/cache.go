package informers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/restset"
)

// Cache is the shared cache: a set of informers, one per kind, mode and
// selection, created on first use and run until the Cache's Start context ends.
//
// A Cache is safe for concurrent use. Informers requested before Start begin
// when Start is called; informers requested after Start begin at once.
type Cache struct {
	opts Options
	// rest makes the REST clients of typed kinds (see RESTClient).
	rest *restset.Set
	dyn  *dynamic.DynamicClient
	meta metadata.Interface

	mu sync.Mutex
	// entries is the informer registry, one informer per key; mu guards it.
	entries map[informerKey]*entry
	// indexes holds the indexes AddIndex gave a kind, which every informer
	// of the kind gets, those made later too; mu guards it.
	indexes map[schema.GroupKind]cache.Indexers
	// runCtx is the context informers run on; nil until Start. mu guards it.
	runCtx context.Context
	// startedCh is closed by Start.
	startedCh chan struct{}
	// wg counts running informers.
	wg      sync.WaitGroup
	marksMu sync.Mutex
	// marks holds this process's recent writes not yet seen in the cache;
	// marksMu guards it.
	marks map[writeKey]*writeMark
	// hasMarks is whether marks holds any, so that reads skip marksMu when
	// it holds none; it is written with marksMu held.
	hasMarks atomic.Bool
	// swept is when expired marks were last dropped; marksMu guards it.
	swept time.Time

	// codecs holds the codec of each compact kind and mode, shared by
	// the kind's informers; mu guards it.
	codecs map[codecKey]*compactCodec

	// share makes equal values of cached objects one; nil with
	// Options.DisableSharing.
	share *sharer

	// routes maps the keys (selections without a shard) routeReads routes
	// to their route; nil until the first routeReads. The map is never
	// modified once stored: routeReads stores a new one, with routesMu and
	// mu held.
	routes   atomic.Pointer[map[informerKey]*shardRoute]
	routesMu sync.Mutex

	// hubs share the lists and watches of the informers of a kind's
	// buckets, by their key without the shard selector (see shardHub);
	// hubsMu guards it.
	hubs   map[informerKey]*shardHub
	hubsMu sync.Mutex

	probeMu sync.Mutex
	// probed remembers, per resource, whether the API server honours shard
	// selectors (see serverShards); probeMu guards it.
	probed map[schema.GroupResource]bool
	// probes shares the probe of a resource between the informers that ask
	// at once.
	probes singleflight.Group
}

// codecKey identifies the codec of a compact kind and mode.
type codecKey struct {
	gvk  schema.GroupVersionKind
	mode Mode
}

// informerKey identifies one informer: kind, mode and selection.
type informerKey struct {
	gvk       schema.GroupVersionKind
	mode      Mode
	namespace string
	labels    string
	fields    string
	// shard is the shard selector's String, "" for none.
	shard string
}

// New returns a Cache that reads from the API server cfg points at. It makes no
// request until an informer starts.
func New(cfg *rest.Config, opts Options) (*Cache, error) {
	if cfg == nil {
		return nil, errors.New("informers: New needs a *rest.Config, got nil")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	httpClient := opts.HTTPClient
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("informers: HTTP client for %s: %w", cfg.Host, err)
		}
	}
	var err error
	if opts.Mapper == nil {
		if opts.Mapper, err = NewRESTMapper(cfg, httpClient); err != nil {
			return nil, err
		}
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("informers: dynamic client for %s: %w", cfg.Host, err)
	}
	md, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("informers: metadata client for %s: %w", cfg.Host, err)
	}
	rs, err := restset.New(cfg, httpClient, opts.Scheme, opts.codecs())
	if err != nil {
		return nil, fmt.Errorf("informers: %w", err)
	}
	c := &Cache{
		opts:      opts,
		rest:      rs,
		dyn:       dyn,
		meta:      md,
		entries:   map[informerKey]*entry{},
		startedCh: make(chan struct{}),
		marks:     map[writeKey]*writeMark{},
		probed:    map[schema.GroupResource]bool{},
	}
	if !opts.DisableSharing {
		c.share = newSharer()
	}
	return c, nil
}

// Scheme returns the scheme the cache decodes typed objects with.
func (c *Cache) Scheme() *runtime.Scheme { return c.opts.Scheme }

// RESTClient returns the cache's JSON REST client for group version gv,
// made on first use and shared from then on. The cache lists and watches
// with it the typed kinds of gv that have no protobuf encoding (asking for
// CBOR unless Options.DisableCBOR), and a client.Client or client.APIReader
// built on the cache without a Config of its own sends its requests with
// it.
func (c *Cache) RESTClient(gv schema.GroupVersion) (*rest.RESTClient, error) {
	rc, err := c.rest.For(gv, restset.JSON)
	if err != nil {
		return nil, fmt.Errorf("informers: %w", err)
	}
	return rc, nil
}

// Start runs every informer requested so far, and every one requested later,
// until ctx is done; then it waits for them to stop and returns nil. Start may
// be called once.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.runCtx != nil {
		c.mu.Unlock()
		return errors.New("informers: Cache.Start called twice")
	}
	c.runCtx = ctx
	for _, e := range c.entries {
		c.runLocked(e)
	}
	close(c.startedCh)
	c.mu.Unlock()
	<-ctx.Done()
	c.wg.Wait()
	return nil
}

// runLocked starts e's informer on a child of the run context. c.mu must
// be held.
func (c *Cache) runLocked(e *entry) {
	ctx, cancel := context.WithCancel(c.runCtx)
	e.stop = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		e.informer.RunWithContext(ctx)
	}()
}

// dropUnpinned stops and forgets e unless a handle from For or ForObject
// holds it: an informer that reads alone asked for, and that cannot sync,
// must not keep the cache unready. The next read creates a new one.
func (c *Cache) dropUnpinned(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.pinned || c.entries[e.key] != e {
		return
	}
	delete(c.entries, e.key)
	c.wholeLocked(e, true)
	e.dropped.Store(true)
	if e.stop != nil {
		e.stop()
	}
}

// WaitForSync waits until every informer requested so far has listed its
// objects once, or the sync timeout or ctx ends first. The error then names
// every kind that has not synced and the last cause seen for each.
func (c *Cache) WaitForSync(ctx context.Context) error {
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	return c.waitForSync(ctx, false, entries...)
}

// waitForSync waits for entries to sync. With failFast, it gives up at the
// first forbidden list or watch of any of them instead of waiting for RBAC
// to change, and at an entry dropped meanwhile (see dropUnpinned), whose
// cause it reports; without failFast, dropped entries are not waited for.
func (c *Cache) waitForSync(ctx context.Context, failFast bool, entries ...*entry) error {
	if c.opts.SyncTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.SyncTimeout)
		defer cancel()
	}
	start := time.Now()
	select {
	case <-c.startedCh:
	case <-ctx.Done():
		return fmt.Errorf("informers: waited %v: %w", time.Since(start).Round(time.Millisecond), ErrNotStarted)
	}
	// Start set runCtx before closing startedCh: safe to read now.
	stopped := c.runCtx.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := entries[:0:0]
		for _, e := range entries {
			if e.informer.HasSynced() {
				continue
			}
			if e.dropped.Load() {
				if failFast {
					// Another read saw the refusal first and dropped
					// e: its empty store must not answer this one.
					return e.syncError(time.Since(start), ErrStopped)
				}
				continue
			}
			pending = append(pending, e)
		}
		if len(pending) == 0 {
			return nil
		}
		if failFast {
			for _, e := range pending {
				if cause := e.cause(); apierrors.IsForbidden(cause) {
					return e.syncError(time.Since(start), cause)
				}
			}
		}
		select {
		case <-ctx.Done():
			errs := make([]error, 0, len(pending))
			for _, e := range pending {
				errs = append(errs, e.syncError(time.Since(start), context.Cause(ctx)))
			}
			return errors.Join(errs...)
		case <-stopped:
			// Informers requested now never run; ones that had not synced
			// never will.
			errs := make([]error, 0, len(pending))
			for _, e := range pending {
				errs = append(errs, fmt.Errorf("informers: %s: %w", e.desc, ErrStopped))
			}
			return errors.Join(errs...)
		case <-tick.C:
		}
	}
}

// Health reports the state of every informer: nil when all have synced and
// their last list or watch succeeded; otherwise an error per informer naming
// its kind and cause. Readiness checks use it.
func (c *Cache) Health() error {
	c.mu.Lock()
	started := c.runCtx != nil
	var errs []error
	for _, e := range c.entries {
		if err := e.health(started); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Unlock()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// lookup returns the informer for obj's Go type and sel, creating it (and
// starting it, when the cache runs) on first use. pin keeps it for good (see
// dropUnpinned).
func (c *Cache) lookup(obj runtime.Object, sel Selection, pin bool) (*entry, error) {
	key, sel, err := c.keyFor(obj, sel)
	if err != nil {
		return nil, err
	}
	var filter *shardFilter
	if key.shard != "" {
		if filter, err = compileShard(sel.Shard); err != nil {
			return nil, fmt.Errorf("informers: %s: Selection.Shard %q: %w", key.describe(), key.shard, err)
		}
	}

	e, byRead, err := c.lookupOrCreate(key, sel, filter, obj, pin)
	if byRead && err == nil && c.opts.OnUnwatchedRead != nil {
		c.opts.OnUnwatchedRead(UnwatchedRead{Informer: e.desc, Kind: key.gvk, Mode: key.mode})
	}
	return e, err
}

// lookupOrCreate is lookup once the key is known; byRead reports that a
// read (pin false) made the informer.
func (c *Cache) lookupOrCreate(key informerKey, sel Selection, filter *shardFilter, obj runtime.Object, pin bool) (_ *entry, byRead bool, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.pinned = e.pinned || pin
		return e, false, nil
	}
	if !pin && key.shard == "" && c.routed(key) != nil {
		// A read of a routed selection, whose informer of the whole
		// selection went away since the read chose it: read the buckets.
		return nil, false, errRouted
	}
	if _, declared := c.opts.ByKind[key.gvk.GroupKind()]; !pin && c.opts.RefuseUnwatchedReads && !declared {
		return nil, false, notWatched(key)
	}
	e, err := c.newEntry(key, obj)
	if err != nil {
		return nil, false, err
	}
	e.pinned, e.startedByRead = pin, !pin
	if sel.Labels != nil && !sel.Labels.Empty() {
		e.selector = sel.Labels
	}
	if filter != nil {
		e.shard, e.shardSel = filter, sel.Shard.DeepCopySelector()
	}
	c.entries[key] = e
	c.wholeLocked(e, false)
	if c.runCtx != nil {
		c.runLocked(e)
	}
	return e, !pin, nil
}

// notWatched is the error of a read that Options.RefuseUnwatchedReads
// refuses.
func notWatched(key informerKey) error {
	where := ""
	if key.namespace != "" {
		where = " in namespace " + key.namespace
	}
	return fmt.Errorf("informers: no informer holds %s as %s objects%s, and Options.RefuseUnwatchedReads refuses to start one for a read: "+
		"watch the kind (a controller's For, Owns or Watches, or informers.For), declare it in Options.ByKind, "+
		"or read it from the API server (the framework's Manager.APIReader): %w", describe(key.gvk), key.mode, where, ErrNotWatched)
}

// keyFor returns the key of the informer for obj's Go type and sel, and
// sel with the defaults applied: a Selection that sets no more than Kind
// and Shard takes the kind's Options.ByKind (keeping its own Shard, if
// any), and an empty namespace is Options.Namespace.
func (c *Cache) keyFor(obj runtime.Object, sel Selection) (informerKey, Selection, error) {
	gvk, err := kindFor(c.opts.Scheme, obj, sel.Kind)
	if err != nil {
		return informerKey{}, sel, err
	}
	key, sel := c.keyOfKind(gvk, modeOf(obj), sel)
	return key, sel, nil
}

// keyOfKind is keyFor of an object of kind gvk in mode.
func (c *Cache) keyOfKind(gvk schema.GroupVersionKind, mode Mode, sel Selection) (informerKey, Selection) {
	if sel.Namespace == "" && sel.Labels == nil && sel.Fields == nil {
		if def, ok := c.opts.ByKind[gvk.GroupKind()]; ok {
			def.Kind = gvk
			if sel.Shard != nil {
				def.Shard = sel.Shard
			}
			sel = def
		}
	}
	if sel.Namespace == "" {
		sel.Namespace = c.opts.Namespace
	}
	key := informerKey{gvk: gvk, mode: mode, namespace: sel.Namespace}
	if sel.Labels != nil && !sel.Labels.Empty() {
		key.labels = sel.Labels.String()
	}
	if sel.Fields != nil && !sel.Fields.Empty() {
		key.fields = sel.Fields.String()
	}
	if sel.Shard != nil && !sel.Shard.Empty() {
		key.shard = sel.Shard.String()
	}
	return key, sel
}

func (c *Cache) newEntry(key informerKey, example runtime.Object) (*entry, error) {
	e := &entry{key: key, desc: key.describe(), cache: c, resync: c.opts.resyncFor(key.gvk.GroupKind())}
	if key.mode == Typed {
		decoded, err := c.opts.Scheme.New(key.gvk)
		if err != nil {
			return nil, fmt.Errorf("informers: %s: %w", e.desc, err)
		}
		e.goType = reflect.TypeOf(decoded)
	}
	if o, ok := c.opts.Compact[key.gvk.GroupKind()]; ok && key.mode != Metadata {
		e.compact = c.codecLocked(key, e.goType, o)
	}
	lw, err := c.listWatch(e)
	if err != nil {
		return nil, err
	}
	example = example.DeepCopyObject()
	// Every informer checks for due resyncs each MinResyncPeriod, and every
	// listener says its own period (AddListener): client-go only lets a
	// listener resync more often than its informer's own period when the
	// listener is added before the informer starts, and never when that
	// period is zero. The check is a timer tick and a look at the listeners;
	// nothing is replayed unless a listener is due.
	indexers := maps.Clone(c.indexes[key.gvk.GroupKind()])
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
		ResyncPeriod:      MinResyncPeriod,
		Indexers:          indexers,
		ObjectDescription: e.desc,
	})
	if err := inf.SetTransform(c.transform(e)); err != nil {
		return nil, fmt.Errorf("informers: %s: %w", e.desc, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(e.onWatchError); err != nil {
		return nil, fmt.Errorf("informers: %s: %w", e.desc, err)
	}
	e.informer = inf
	if err := e.countAlone(); err != nil {
		return nil, fmt.Errorf("informers: %s: %w", e.desc, err)
	}
	e.indexes.Store(int64(len(indexers)))
	return e, nil
}

// codecLocked returns the codec of key's kind and mode, made on first use.
// c.mu must be held.
func (c *Cache) codecLocked(key informerKey, goType reflect.Type, o CompactOptions) *compactCodec {
	ck := codecKey{key.gvk, key.mode}
	if cc, ok := c.codecs[ck]; ok {
		return cc
	}
	if c.codecs == nil {
		c.codecs = map[codecKey]*compactCodec{}
	}
	cc := newCompactCodec(key.gvk, key.mode, goType, o, c.share)
	c.codecs[ck] = cc
	return cc
}

func (k informerKey) describe() string {
	s := describe(k.gvk)
	if k.mode != Typed {
		s += " (" + k.mode.String() + ")"
	}
	if k.namespace != "" {
		s += " in namespace " + k.namespace
	}
	if k.labels != "" {
		s += " with labels " + k.labels
	}
	if k.fields != "" {
		s += " with fields " + k.fields
	}
	if k.shard != "" {
		s += " in shard " + k.shard
	}
	return s
}
