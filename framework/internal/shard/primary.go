package shard

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/restset"
	"github.com/converge-dev/converge/internal/shardtest"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// Primary is the primary source of a sharded controller: one informer
// per bucket this member holds, each with the bucket's shard selection,
// feeding the controller's queue. It is also the controller's reader of
// the primary kind and its Gate, and the ring's User.
type Primary[T object.Object] struct {
	src     Source
	bind    func(sel apisharding.Selector, h Hooks[T]) (Bound[T], error)
	kind    schema.GroupVersionKind
	ring    *ring.Ring
	holds   *Holds
	cache   *informers.Cache
	buckets sharding.Buckets
	ctl     string
	// onDelete, when set, sees each deleted object before its key is queued.
	onDelete func(T)
	// dropped counts the keys dropped because another member holds their
	// bucket (see Admit).
	dropped interface{ Inc() }
	// owed visits the keys the controller's queue still owes a worker;
	// set before start.
	owed func(func(reconcile.Request, reconcile.Reason))
	// secondaries are the controller's sources read per bucket, as the
	// primary kind is (see AddSecondary); set before start.
	secondaries []Source

	// started is closed once the controller started, and ctx is its
	// context, on which listeners run.
	started chan struct{}
	ctx     context.Context

	mu sync.Mutex
	// reads are the informers of the held buckets; serving the buckets whose
	// keys are dispatched; inflight counts the running reconciles of each
	// bucket, and idle is signalled when one ends; gone remembers the bucket
	// of deleted objects by key, for sharding.ByUID (the key alone does
	// not say). mu guards them.
	reads    map[int]*bucketRead[T]
	serving  map[int]bool
	inflight map[int]int
	idle     *sync.Cond
	gone     map[reconcile.Request]int
	// frozen holds the marks of the buckets held when the controller began
	// to stop, taken before its workers stopped; nil until then.
	frozen map[int]string

	// informers is each bucket of reads with its informer, copied on
	// change, for shards to read without mu.
	informers atomic.Pointer[map[int]*informers.Informer[T]]
	// shards reads the objects of the held buckets.
	shards bucketReader[T]
}

// bucketReader reads the primary kind from the informers of the held
// buckets: informers' reader of a kind's buckets, made by
// hooks.NewBucketReader.
type bucketReader[T object.Object] interface {
	informers.Reader[T]
	BucketOf(key types.NamespacedName) (int, bool)
}

// bucketRead is one bucket's informer and the controller's listener on it,
// and the bucket's informers and listeners of the secondary sources.
type bucketRead[T object.Object] struct {
	// ctx is the context of the holding of the bucket it was read for.
	ctx       context.Context
	inf       *informers.Informer[T]
	reg       cache.ResourceEventHandlerRegistration
	secondary []listening
	// delivered is the highest resourceVersion among the objects whose
	// events the listener queued, 0 before the first; unordered is set once
	// an object's resourceVersion was not a decimal integer (then the
	// bucket gets no mark).
	delivered atomic.Uint64
	unordered atomic.Bool
}

// Holds counts the controllers of a ring that read each bucket
// informer, by its description (one per informer key): one controller's
// own kind may be another's owned kind, and both then read the same
// informer of a bucket, which is stopped when the last of them lets go.
type Holds struct {
	mu sync.Mutex
	// n counts the holders of each informer; mu guards it.
	n map[string]int
}

// hold counts one more holder of inf.
func (h *Holds) hold(inf Informer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[inf.String()]++
}

// letGo counts one holder of inf less, and stops inf when it was the last.
func (h *Holds) letGo(inf Informer) {
	h.mu.Lock()
	k := inf.String()
	h.n[k]--
	last := h.n[k] <= 0
	if last {
		delete(h.n, k)
	}
	h.mu.Unlock()
	if last {
		inf.Stop()
	}
}

// listening is a source bound to a bucket, and its listener.
type listening struct {
	src Listener
	reg cache.ResourceEventHandlerRegistration
}

// see records that the listener queued obj's event.
func (rd *bucketRead[T]) see(obj T) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		rd.unordered.Store(true)
		return
	}
	if rv > rd.delivered.Load() { // only the listener's goroutine stores
		rd.delivered.Store(rv)
	}
}

// New returns the primary source of a sharded controller as cfg says.
func New[T object.Object](cfg Config[T]) (*Primary[T], error) {
	p := &Primary[T]{
		src: cfg.Source, bind: cfg.Bind, kind: cfg.Kind, ring: cfg.Ring, holds: cfg.Holds, cache: cfg.Cache,
		buckets: cfg.Ring.Options().Buckets, ctl: cfg.Controller, dropped: cfg.Dropped,
		started:  make(chan struct{}),
		reads:    map[int]*bucketRead[T]{},
		serving:  map[int]bool{},
		inflight: map[int]int{},
		gone:     map[reconcile.Request]int{},
	}
	p.idle = sync.NewCond(&p.mu)
	p.informers.Store(&map[int]*informers.Informer[T]{})
	shards, err := hooks.NewBucketReader[bucketReader[T]]((*informers.Informer[T])(nil), p.kind, p.buckets, func() map[int]*informers.Informer[T] { return *p.informers.Load() })
	if err != nil {
		return nil, err
	}
	p.shards = shards
	return p, nil
}

// publishLocked copies reads into informers. p.mu must be held.
func (p *Primary[T]) publishLocked() {
	infs := make(map[int]*informers.Informer[T], len(p.reads))
	for b, rd := range p.reads {
		infs[b] = rd.inf
	}
	p.informers.Store(&infs)
}

// Begin is Gate.Begin.
func (p *Primary[T]) Begin(ctx context.Context) {
	p.ctx = ctx
	close(p.started)
}

func (p *Primary[T]) Acquire(ctx context.Context, b int, marks map[string]string) error {
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	rd := p.reads[b] // read by an earlier try that did not sync
	if rd != nil && rd.ctx != ctx {
		// Read for an earlier holding of b whose drop has not run yet:
		// it finds nothing of its own then.
		p.unreadLocked(b)
		p.mu.Unlock()
		rd.release(p.holds)
		p.mu.Lock()
		rd = nil
	}
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err // lost already: make no informer
	}
	if rd == nil {
		var err error
		if rd, err = p.Read(ctx, b, marks); err != nil {
			return err
		}
	}
	for _, l := range rd.secondary {
		if err := l.src.Informer.WaitForSync(ctx); err != nil {
			return fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
		}
	}
	if err := rd.inf.WaitForSync(ctx); err != nil {
		return fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
	}
	return nil
}

// Read makes the informers of bucket b, of the primary kind and of the
// secondary sources, starts the controller's listeners on them and
// publishes them in reads, unless ctx ended meanwhile (the bucket was
// lost): then it undoes what it did, as Drop would. Acquire calls it.
func (p *Primary[T]) Read(ctx context.Context, b int, marks map[string]string) (*bucketRead[T], error) {
	rd := &bucketRead[T]{ctx: ctx}
	fail := func(err error) (*bucketRead[T], error) {
		rd.release(p.holds)
		return nil, fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
	}
	// The secondary sources first: their informers exist before the
	// cache's reads of their kinds come to the bucket.
	for _, s := range p.secondaries {
		sb, err := s.BindBucket(p.buckets.Selector(b))
		if err != nil {
			return fail(err)
		}
		p.holds.hold(sb.Informer)
		l := listening{src: sb}
		l.reg, err = sb.Start(p.ctx)
		rd.secondary = append(rd.secondary, l)
		if err != nil {
			return fail(err)
		}
	}
	h := Hooks[T]{Delivered: rd.see}
	if mark, err := strconv.ParseUint(marks[p.ctl], 10, 64); err == nil {
		// The member that handed b over had reconciled every change below
		// mark: objects at or above it may carry one it had not.
		h.Changed = func(obj T) bool {
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			return err != nil || rv >= mark
		}
	}
	h.OnDelete = func(obj T) {
		if p.buckets.By == sharding.ByUID {
			p.mu.Lock()
			p.gone[reconcile.Request{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = b
			p.mu.Unlock()
		}
		if p.onDelete != nil {
			p.onDelete(obj)
		}
	}
	bound, err := p.bind(p.buckets.Selector(b), h)
	if err != nil {
		return fail(err)
	}
	p.holds.hold(bound.Informer)
	rd.inf = bound.Informer
	if rd.reg, err = bound.Start(p.ctx); err != nil {
		return fail(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Checked with mu held: a bucket lost from here on is dropped after
	// its context ended, and drop then finds it in reads.
	if err := ctx.Err(); err != nil {
		rd.release(p.holds)
		return nil, err
	}
	p.reads[b] = rd
	p.publishLocked()
	return rd, nil
}

// release removes the controller's listeners from rd's informers and lets
// go of them: the ring stops each once no controller holds it.
func (rd *bucketRead[T]) release(h *Holds) {
	if rd.inf != nil {
		if rd.reg != nil {
			_ = rd.inf.RemoveListener(rd.reg)
		}
		h.letGo(rd.inf)
	}
	for _, l := range rd.secondary {
		if l.reg != nil {
			_ = l.src.Informer.RemoveListener(l.reg)
		}
		h.letGo(l.src.Informer)
	}
}

// AddSecondary reads src per held bucket, as the primary kind is read, and
// reports whether it does: when the ring shards by namespace, the primary
// kind and src's kind are namespaced, and src's requests stay in each
// object's namespace (Owned, OwnedByAny, SameNamespace). The member that
// holds a namespace's bucket then caches the namespace's objects of that
// kind, and no other member does. A kind whose scope the REST mapper
// cannot tell yet (a custom resource not yet served) is cached whole, as
// the log says. mapper tells the scopes. Call it before start.
func (p *Primary[T]) AddSecondary(src Source, mapper meta.RESTMapper, log logr.Logger) bool {
	if p.buckets.By != sharding.ByNamespace || !src.Local() || src.Check() != nil {
		return false // bind reports what check found
	}
	for _, s := range []Source{p.src, src} {
		gvk, err := s.Kind()
		if err != nil {
			return false // bind reports it
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err != nil:
			log.Info("a watched kind is cached whole, not per bucket: the API server does not say whether it (or the controller's own kind) is namespaced", "source", src.String(), "kind", gvk.String(), "error", err.Error())
			return false
		case m.Scope.Name() != meta.RESTScopeNameNamespace:
			return false // a cluster-scoped owner's children are in every namespace
		}
	}
	p.secondaries = append(p.secondaries, src)
	return true
}

// Register joins p to its ring, which must not have started, and routes
// the cache's reads of the primary kind and of the secondary sources'
// kinds, as their informers make them, to the held buckets' informers
// (hooks.RouteReads).
func (p *Primary[T]) Register() error {
	if err := p.ring.Register(p); err != nil {
		return err
	}
	if err := p.routeReads(); err != nil {
		p.ring.Unregister(p)
		return err
	}
	return nil
}

// Unregister undoes Register, when the manager refused the controller.
func (p *Primary[T]) Unregister() { p.ring.Unregister(p) }

func (p *Primary[T]) routeReads() error {
	for _, s := range append([]Source{p.src}, p.secondaries...) {
		example, sel, err := s.ReadsAs()
		if err != nil {
			return err
		}
		if err := hooks.RouteReads(p.cache, example, sel, p.buckets, p.heldBuckets); err != nil {
			return err
		}
	}
	return nil
}

func (p *Primary[T]) Serve(ctx context.Context, b int, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rd := p.reads[b]; rd != nil && rd.ctx != ctx {
		return // for a holding that ended: b was claimed again since
	}
	if on {
		p.serving[b] = true
	} else {
		delete(p.serving, b)
	}
}

func (p *Primary[T]) Drain(b int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.idle.Broadcast()
		p.mu.Unlock()
	})
	defer stop.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.inflight[b] > 0 && time.Now().Before(deadline) {
		p.idle.Wait()
	}
	if p.inflight[b] == 0 {
		return nil
	}
	return []string{fmt.Sprintf("controller %q: %d reconcile(s) of bucket %d", p.ctl, p.inflight[b], b)}
}

func (p *Primary[T]) Drop(ctx context.Context, b int) {
	p.mu.Lock()
	rd := p.reads[b]
	if rd != nil && rd.ctx != ctx {
		p.mu.Unlock()
		return // read for a later holding of b
	}
	p.unreadLocked(b)
	p.mu.Unlock()
	if rd != nil {
		rd.release(p.holds)
	}
}

// unreadLocked forgets b's reads and the deleted objects of b. p.mu must
// be held.
func (p *Primary[T]) unreadLocked(b int) {
	delete(p.reads, b)
	p.publishLocked()
	for req, gb := range p.gone {
		if gb == b {
			delete(p.gone, req)
		}
	}
}

// enter decides whether req runs here; when it does (DispatchRun), it counts
// the reconcile in until exit and returns its bucket. The ring's lock is
// never taken with p.mu held: the ring calls serve with its own held.
func (p *Primary[T]) enter(req reconcile.Request) (int, Dispatch) {
	b, known := p.bucketOf(req)
	p.mu.Lock()
	serving, reading := p.serving[b], p.reads[b] != nil
	p.mu.Unlock()
	switch {
	case !known || !serving && !reading:
		return b, DispatchDrop
	case !serving:
		return b, DispatchWait
	case p.ring.Check(b) != nil:
		return b, DispatchWait // not renewed lately: it may come back
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.serving[b] {
		return b, DispatchWait // given up meanwhile: the next try drops it
	}
	p.inflight[b]++
	return b, DispatchRun
}

// bucketOf returns the bucket of req's object, when it can be told: from
// the object (see bucketReader.BucketOf), or for one deleted by UID from its
// delete event.
func (p *Primary[T]) bucketOf(req reconcile.Request) (int, bool) {
	if b, ok := p.shards.BucketOf(types.NamespacedName{Namespace: req.Namespace, Name: req.Name}); ok {
		return b, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.gone[req]
	return b, ok
}

// Status is Gate.Status. The ring's lock is taken without p.mu held, as
// in enter.
func (p *Primary[T]) Status(req reconcile.Request) *introspect.ShardStatus {
	b, known := p.bucketOf(req)
	if !known {
		st := p.ring.Status()
		return &introspect.ShardStatus{Bucket: -1, Buckets: p.buckets, Serving: st.Serving}
	}
	state, holder := p.ring.BucketStatus(b)
	return &introspect.ShardStatus{Bucket: b, Buckets: p.buckets, State: state, Holder: holder}
}

// exit counts a reconcile of bucket b out.
func (p *Primary[T]) exit(req reconcile.Request, b int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[b]--
	if gb, ok := p.gone[req]; ok && gb == b {
		if rd := p.reads[b]; rd == nil || !rd.inf.Contains(types.NamespacedName{Namespace: req.Namespace, Name: req.Name}) {
			delete(p.gone, req)
		}
	}
	p.idle.Broadcast()
}

// reconcileContext returns the context of a reconcile of bucket b: fenced
// by the bucket, and cancelled when the bucket is lost or given up.
func (p *Primary[T]) reconcileContext(ctx context.Context, b int) (context.Context, context.CancelFunc) {
	ctx = restset.WithWriteFence(ctx, func() error { return p.ring.Check(b) })
	if !shardtest.PreconditionsDisabled() {
		// The fence stops writes as they leave; a write that left before
		// it closed and arrives late is stopped by the server.
		ctx = client.WithPreconditions(ctx)
	}
	ctx = sharding.WithBucket(ctx, b, p.buckets)
	bctx := p.ring.BucketContext(b)
	if bctx == nil {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx, cancel
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(bctx, cancel)
	return ctx, func() { stop(); cancel() }
}
