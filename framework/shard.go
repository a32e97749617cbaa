package framework

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
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

// shardedPrimary is the primary source of a sharded controller: one
// informer per bucket this member holds, each with the bucket's shard
// selection, feeding the controller's queue. It is also the controller's
// reader of the primary kind and what its workers ask before dispatching a
// key.
type shardedPrimary[T object.Object] struct {
	src     kindSource[T]
	w       *watchTarget
	ring    *ring.Ring
	holds   *bucketHolds
	buckets sharding.Buckets
	ctl     string
	// onDelete, when set, sees each deleted object before its key is queued.
	onDelete func(T)
	// dropped counts the keys dropped because another member holds their
	// bucket (see admit).
	dropped interface{ Inc() }
	// owed visits the keys the controller's queue still owes a worker;
	// set before start.
	owed func(func(reconcile.Request, reconcile.Reason))
	// secondaries are the controller's sources read per bucket, as the
	// primary kind is (see addSecondary); set before start.
	secondaries []bucketSource

	// started is closed once the controller started, and ctx is its
	// context, on which listeners run.
	started chan struct{}
	ctx     context.Context

	mu sync.Mutex
	// reads are the informers of the held buckets; serving the buckets whose
	// keys are dispatched; inflight counts the running reconciles of each
	// bucket, and idle is signalled when one ends; gone remembers the bucket
	// of deleted objects by key, for ShardByUID (the key alone does not say).
	// mu guards them.
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

// bucketHolds counts the controllers of a ring that read each bucket
// informer, by its description (one per informer key): one controller's
// own kind may be another's owned kind, and both then read the same
// informer of a bucket, which is stopped when the last of them lets go.
type bucketHolds struct {
	mu sync.Mutex
	// n counts the holders of each informer; mu guards it.
	n map[string]int
}

// hold counts one more holder of inf.
func (h *bucketHolds) hold(inf sourceInformer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[inf.String()]++
}

// letGo counts one holder of inf less, and stops inf when it was the last.
func (h *bucketHolds) letGo(inf sourceInformer) {
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
	src boundSource
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

func newShardedPrimary[T object.Object](src kindSource[T], w *watchTarget, r *ring.Ring, holds *bucketHolds, ctl string) (*shardedPrimary[T], error) {
	p := &shardedPrimary[T]{
		src: src, w: w, ring: r, holds: holds, buckets: r.Options().Buckets, ctl: ctl,
		started:  make(chan struct{}),
		reads:    map[int]*bucketRead[T]{},
		serving:  map[int]bool{},
		inflight: map[int]int{},
		gone:     map[reconcile.Request]int{},
	}
	p.idle = sync.NewCond(&p.mu)
	p.informers.Store(&map[int]*informers.Informer[T]{})
	shards, err := hooks.NewBucketReader[bucketReader[T]]((*informers.Informer[T])(nil), src.sel.Kind, p.buckets, func() map[int]*informers.Informer[T] { return *p.informers.Load() })
	if err != nil {
		return nil, err
	}
	p.shards = shards
	return p, nil
}

// publishLocked copies reads into informers. p.mu must be held.
func (p *shardedPrimary[T]) publishLocked() {
	infs := make(map[int]*informers.Informer[T], len(p.reads))
	for b, rd := range p.reads {
		infs[b] = rd.inf
	}
	p.informers.Store(&infs)
}

// begin is called by the controller's Start.
func (p *shardedPrimary[T]) begin(ctx context.Context) {
	p.ctx = ctx
	close(p.started)
}

func (p *shardedPrimary[T]) Acquire(ctx context.Context, b int, marks map[string]string) error {
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
		if rd, err = p.read(ctx, b, marks); err != nil {
			return err
		}
	}
	for _, l := range rd.secondary {
		if err := l.src.informer().WaitForSync(ctx); err != nil {
			return fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
		}
	}
	if err := rd.inf.WaitForSync(ctx); err != nil {
		return fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
	}
	return nil
}

// read makes the informers of bucket b, of the primary kind and of the
// secondary sources, starts the controller's listeners on them and
// publishes them in reads, unless ctx ended meanwhile (the bucket was
// lost): then it undoes what it did, as drop would.
func (p *shardedPrimary[T]) read(ctx context.Context, b int, marks map[string]string) (*bucketRead[T], error) {
	rd := &bucketRead[T]{ctx: ctx}
	fail := func(err error) (*bucketRead[T], error) {
		rd.release(p.holds)
		return nil, fmt.Errorf("controller %q: bucket %d: %w", p.ctl, b, err)
	}
	// The secondary sources first: their informers exist before the
	// cache's reads of their kinds come to the bucket.
	for _, s := range p.secondaries {
		sb, err := s.bindShard(p.w, p.buckets.Selector(b))
		if err != nil {
			return fail(err)
		}
		p.holds.hold(sb.informer())
		l := listening{src: sb}
		l.reg, err = sb.start(p.ctx)
		rd.secondary = append(rd.secondary, l)
		if err != nil {
			return fail(err)
		}
	}
	src := p.src
	src.sel.Shard = p.buckets.Selector(b)
	bound, err := src.bindKind(p.w)
	if err != nil {
		return fail(err)
	}
	p.holds.hold(bound.inf)
	rd.inf = bound.inf
	bound.delivered = rd.see
	if mark, err := strconv.ParseUint(marks[p.ctl], 10, 64); err == nil {
		// The member that handed b over had reconciled every change below
		// mark: objects at or above it may carry one it had not.
		bound.changed = func(obj T) bool {
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			return err != nil || rv >= mark
		}
	}
	bound.onDelete = func(obj T) {
		if p.buckets.By == sharding.ByUID {
			p.mu.Lock()
			p.gone[requestFor(obj)] = b
			p.mu.Unlock()
		}
		if p.onDelete != nil {
			p.onDelete(obj)
		}
	}
	if rd.reg, err = bound.start(p.ctx); err != nil {
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
func (rd *bucketRead[T]) release(h *bucketHolds) {
	if rd.inf != nil {
		if rd.reg != nil {
			_ = rd.inf.RemoveListener(rd.reg)
		}
		h.letGo(rd.inf)
	}
	for _, l := range rd.secondary {
		if l.reg != nil {
			_ = l.src.informer().RemoveListener(l.reg)
		}
		h.letGo(l.src.informer())
	}
}

// addSecondary reads src per held bucket, as the primary kind is read, and
// reports whether it does: when the ring shards by namespace, the primary
// kind and src's kind are namespaced, and src's requests stay in each
// object's namespace (Owned, OwnedByAny, SameNamespace). The member that
// holds a namespace's bucket then caches the namespace's objects of that
// kind, and no other member does. A kind whose scope the REST mapper
// cannot tell yet (a custom resource not yet served) is cached whole, as
// the log says. Call it before start.
func (p *shardedPrimary[T]) addSecondary(mgr *Manager, src Source, log logr.Logger) bool {
	bs, ok := src.(bucketSource)
	if !ok || p.buckets.By != sharding.ByNamespace || !bs.local() || bs.check() != nil {
		return false // bind reports what check found
	}
	for _, s := range []bucketSource{&p.src, bs} {
		gvk, err := s.kind(mgr)
		if err != nil {
			return false // bind reports it
		}
		m, err := mgr.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err != nil:
			log.Info("a watched kind is cached whole, not per bucket: the API server does not say whether it (or the controller's own kind) is namespaced", "source", src.String(), "kind", gvk.String(), "error", err.Error())
			return false
		case m.Scope.Name() != meta.RESTScopeNameNamespace:
			return false // a cluster-scoped owner's children are in every namespace
		}
	}
	p.secondaries = append(p.secondaries, bs)
	return true
}

// routeReads routes the cache's reads of the primary kind and of the
// secondary sources' kinds, as their informers make them, to the held
// buckets' informers (hooks.RouteReads).
func (p *shardedPrimary[T]) routeReads(mgr *Manager) error {
	for _, s := range append([]bucketSource{&p.src}, p.secondaries...) {
		example, sel, err := s.readsAs(mgr)
		if err != nil {
			return err
		}
		if err := hooks.RouteReads(mgr.Cache(), example, sel, p.buckets, p.heldBuckets); err != nil {
			return err
		}
	}
	return nil
}

func (p *shardedPrimary[T]) Serve(ctx context.Context, b int, on bool) {
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

func (p *shardedPrimary[T]) Drain(b int, timeout time.Duration) []string {
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

func (p *shardedPrimary[T]) Drop(ctx context.Context, b int) {
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
func (p *shardedPrimary[T]) unreadLocked(b int) {
	delete(p.reads, b)
	p.publishLocked()
	for req, gb := range p.gone {
		if gb == b {
			delete(p.gone, req)
		}
	}
}

// dispatch says what a worker does with req.
type dispatch int

const (
	dispatchRun  dispatch = iota // reconcile it here
	dispatchWait                 // its bucket is held here but not served yet: try again later
	dispatchDrop                 // another member holds its bucket
)

// enter decides whether req runs here; when it does (dispatchRun), it counts
// the reconcile in until exit and returns its bucket. The ring's lock is
// never taken with p.mu held: the ring calls serve with its own held.
func (p *shardedPrimary[T]) enter(req reconcile.Request) (int, dispatch) {
	b, known := p.bucketOf(req)
	p.mu.Lock()
	serving, reading := p.serving[b], p.reads[b] != nil
	p.mu.Unlock()
	switch {
	case !known || !serving && !reading:
		return b, dispatchDrop
	case !serving:
		return b, dispatchWait
	case p.ring.Check(b) != nil:
		return b, dispatchWait // not renewed lately: it may come back
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.serving[b] {
		return b, dispatchWait // given up meanwhile: the next try drops it
	}
	p.inflight[b]++
	return b, dispatchRun
}

// bucketOf returns the bucket of req's object, when it can be told: from
// the object (see Shards.BucketOf), or for one deleted by UID from its
// delete event.
func (p *shardedPrimary[T]) bucketOf(req reconcile.Request) (int, bool) {
	if b, ok := p.shards.BucketOf(types.NamespacedName(req)); ok {
		return b, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.gone[req]
	return b, ok
}

// status says where req's object falls in the ring. The ring's lock is
// taken without p.mu held, as in enter.
func (p *shardedPrimary[T]) status(req reconcile.Request) *introspect.ShardStatus {
	b, known := p.bucketOf(req)
	if !known {
		st := p.ring.Status()
		return &introspect.ShardStatus{Bucket: -1, Buckets: p.buckets, Serving: st.Serving}
	}
	state, holder := p.ring.BucketStatus(b)
	return &introspect.ShardStatus{Bucket: b, Buckets: p.buckets, State: state, Holder: holder}
}

// exit counts a reconcile of bucket b out.
func (p *shardedPrimary[T]) exit(req reconcile.Request, b int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[b]--
	if gb, ok := p.gone[req]; ok && gb == b {
		if rd := p.reads[b]; rd == nil || !rd.inf.Contains(types.NamespacedName(req)) {
			delete(p.gone, req)
		}
	}
	p.idle.Broadcast()
}

// reconcileContext returns the context of a reconcile of bucket b: fenced
// by the bucket, and cancelled when the bucket is lost or given up.
func (p *shardedPrimary[T]) reconcileContext(ctx context.Context, b int) (context.Context, context.CancelFunc) {
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

// held returns the held buckets' informers, by bucket.
func (p *shardedPrimary[T]) held() []*informers.Informer[T] {
	infs := *p.informers.Load()
	out := make([]*informers.Informer[T], 0, len(infs))
	for _, b := range slices.Sorted(maps.Keys(infs)) {
		out = append(out, infs[b])
	}
	return out
}

// heldBuckets returns the buckets whose informers exist, for the cache's
// read routing.
func (p *shardedPrimary[T]) heldBuckets() []int {
	return slices.Sorted(maps.Keys(*p.informers.Load()))
}

// Get reads the object of key from the held bucket that holds it, and
// notes it as read for the preconditions of the reconcile's writes (see
// client.WithPreconditions).
func (p *shardedPrimary[T]) Get(ctx context.Context, key types.NamespacedName) (T, error) {
	obj, err := p.shards.Get(ctx, key)
	if err == nil {
		client.NoteRead(ctx, p.src.sel.Kind.GroupKind(), obj)
	}
	return obj, err
}

// List lists the objects of every held bucket.
func (p *shardedPrimary[T]) List(ctx context.Context, opts ...informers.ListOption) ([]T, error) {
	return p.shards.List(ctx, opts...)
}

// String, Contains, HasSynced, Relists, Health and Len are what the debug
// pages read of the primary informer.
func (p *shardedPrimary[T]) String() string {
	return fmt.Sprintf("%s in buckets %v of ring %s", p.src.String(), p.heldBuckets(), p.ring.Options().Ring)
}

func (p *shardedPrimary[T]) Contains(key types.NamespacedName) bool {
	for _, inf := range p.held() {
		if inf.Contains(key) {
			return true
		}
	}
	return false
}

func (p *shardedPrimary[T]) HasSynced() bool {
	for _, inf := range p.held() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (p *shardedPrimary[T]) Relists() int64 {
	var n int64
	for _, inf := range p.held() {
		n += inf.Relists()
	}
	return n
}

func (p *shardedPrimary[T]) Len() int {
	n := 0
	for _, inf := range p.held() {
		n += inf.Len()
	}
	return n
}

func (p *shardedPrimary[T]) Health() error {
	var errs []error
	for _, inf := range p.held() {
		errs = append(errs, inf.Health())
	}
	return errors.Join(errs...)
}
