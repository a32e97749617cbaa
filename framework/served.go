package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// WhenServed returns src made to watch its kind only while the API server
// serves it: a custom resource whose CRD may be installed after the
// controller starts, or never, or deleted while it runs.
//
// A controller waits at its start for the informers of its sources to sync,
// and fails once the cache's sync timeout (informers.Options.SyncTimeout)
// has passed: a source of a kind the API server does not serve keeps the
// whole controller from running, and then stops the manager. A source made
// with WhenServed does not. When the controller starts, the REST mapper is
// asked for the source's kind: if it is served (or the mapper cannot tell,
// the server being unreachable, say), the source starts as src would, and
// the controller waits for it to sync. If the API server serves no such
// kind, the controller starts without it, and the source asks discovery
// again after a second, then twice as long each time up to 30 seconds,
// until the kind is served; it then makes src's informer, adds its
// listener and waits for the informer to sync.
//
// Once watched, the kind may stop being served (its CRD deleted). When a
// list or watch of the informer finds no such resource, the REST mapper
// is reset (when it is a meta.ResettableRESTMapper, as the manager's own
// is) and asked again; if the kind is gone, the source removes its
// listener and stops its informer, so that the manager stays ready (see
// Manager.AddReadyCheck), and awaits the kind again as at the start.
//
// served is called with true once the kind is served and watched: at the
// controller's start, before its workers run, when the kind is served
// then, else once its informer synced; and with false once the kind is
// found gone, before its informer stops. The requests it returns are
// queued, as changes (the objects that waited for the kind, or that must
// now wait for it; nil means none). It must not block; nil means queue
// nothing.
//
// src is a source built by Owned, OwnedByAny or Map, to which
// WithSelection and SameNamespace are applied before WhenServed, as they
// do not see through it. In a sharded controller whose ring shards by
// namespace, a source whose kind is served when the controller is built is
// read per held bucket as src would be (and not awaited again should the
// kind go away); one whose kind is not is read whole once served.
func WhenServed(src Source, served func(served bool) []reconcile.Request) Source {
	return &servedSource{src: src, served: served}
}

// servedPollMin and servedPollMax bound how long a source made with
// WhenServed waits between two questions to discovery.
const (
	servedPollMin = time.Second
	servedPollMax = 30 * time.Second
)

// servedSource is a Source made by WhenServed.
type servedSource struct {
	src    Source
	served func(bool) []reconcile.Request // nil: queue nothing
}

var _ bucketSource = (*servedSource)(nil)

func (s *servedSource) String() string { return s.src.String() + " (when served)" }

// inner returns src as a bucketSource, which every source built by Owned,
// OwnedByAny and Map is.
func (s *servedSource) inner() (bucketSource, error) {
	bs, ok := s.src.(bucketSource)
	if !ok || bs == nil {
		return nil, fmt.Errorf("WhenServed %v: the source must be built by Owned, OwnedByAny or Map", s.src)
	}
	return bs, nil
}

// The bucketSource methods are src's: a sharded controller reads per bucket
// only kinds the REST mapper finds when the controller is built (see
// shardedPrimary.addSecondary), which need no waiting.

func (s *servedSource) check() error {
	bs, err := s.inner()
	if err != nil {
		return err
	}
	return bs.check()
}

func (s *servedSource) local() bool {
	bs, err := s.inner()
	return err == nil && bs.local()
}

func (s *servedSource) kind(mgr *Manager) (schema.GroupVersionKind, error) {
	bs, err := s.inner()
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return bs.kind(mgr)
}

func (s *servedSource) readsAs(mgr *Manager) (object.Object, informers.Selection, error) {
	bs, err := s.inner()
	if err != nil {
		return nil, informers.Selection{}, err
	}
	return bs.readsAs(mgr)
}

func (s *servedSource) bindShard(w *watchTarget, shard apisharding.Selector) (boundSource, error) {
	bs, err := s.inner()
	if err != nil {
		return nil, err
	}
	return bs.bindShard(w, shard)
}

// bind checks src as its own bind would, and learns its kind, without
// making an informer: that waits for the controller's start.
func (s *servedSource) bind(w *watchTarget) (boundSource, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	gvk, err := s.kind(w.mgr)
	if err != nil {
		return nil, fmt.Errorf("watch %v: %w", s, err)
	}
	return &boundServed{s: s, w: w, gvk: gvk}, nil
}

// boundServed is a servedSource bound to a controller. While its kind is
// not watched it has no informer: it is its own sourceInformer, synced and
// without listeners.
type boundServed struct {
	s   *servedSource
	w   *watchTarget
	gvk schema.GroupVersionKind

	mu sync.Mutex
	// current is src bound to the controller while the kind is watched,
	// nil otherwise; mu guards it.
	current *servedWatch
}

// servedWatch is src bound and listened to, while its kind is served.
type servedWatch struct {
	bound boundSource
	reg   cache.ResourceEventHandlerRegistration
	// atStart is set when the controller's start made it: the controller
	// then removes its listener.
	atStart bool
}

var (
	_ boundSource    = (*boundServed)(nil)
	_ sourceInformer = (*boundServed)(nil)
)

func (b *boundServed) String() string { return b.s.String() }

// start starts src at once when its kind is served, or the mapper cannot
// tell; otherwise it waits for the kind in the background. Either way the
// kind is then watched, until ctx ends, for going away.
func (b *boundServed) start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	_, err := b.w.mgr.mapper.RESTMapping(b.gvk.GroupKind(), b.gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		b.w.log.Info("not watching a kind the API server does not serve; watching it once it is (is its CRD installed?)", "source", b.String(), "kind", b.gvk.String())
		go b.run(ctx, nil)
		return nil, nil
	}
	bound, err := b.s.src.bind(b.w)
	if err != nil {
		return nil, err
	}
	reg, err := bound.start(ctx)
	if err != nil {
		return nil, err
	}
	sw := &servedWatch{bound: bound, reg: reg, atStart: true}
	b.mu.Lock()
	b.current = sw
	b.mu.Unlock()
	b.queueServed(true)
	go b.run(ctx, sw)
	return reg, nil
}

// run watches the kind for going away while sw watches it, and awaits it
// while it is not served, until ctx ends.
func (b *boundServed) run(ctx context.Context, sw *servedWatch) {
	signals, unsubscribe := b.w.mgr.notFound.subscribe(b.gvk.GroupKind())
	defer unsubscribe()
	for {
		if sw == nil {
			if sw = b.await(ctx); sw == nil {
				return
			}
		}
		if !b.untilGone(ctx, signals) {
			if !sw.atStart {
				_ = sw.bound.informer().RemoveListener(sw.reg)
			}
			return
		}
		b.letGo(sw)
		sw = nil
	}
}

// untilGone returns true once the kind is found no longer served, after a
// list or watch found no such resource; false when ctx ended.
func (b *boundServed) untilGone(ctx context.Context, signals <-chan struct{}) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-signals:
		}
		if r, ok := b.w.mgr.mapper.(meta.ResettableRESTMapper); ok {
			r.Reset() // it would remember the kind as served
		}
		_, err := b.w.mgr.mapper.RESTMapping(b.gvk.GroupKind(), b.gvk.Version)
		if err != nil && meta.IsNoMatchError(err) {
			return true
		}
	}
}

// letGo stops watching the kind, which the API server no longer serves:
// served(false) first, which tells the controller's reconciler the kind is
// gone, then the listener and the informer go, and the requests served
// returned are queued.
func (b *boundServed) letGo(sw *servedWatch) {
	b.w.log.Info("the API server no longer serves a kind: not watching it until it does again (was its CRD deleted?)", "source", b.String(), "kind", b.gvk.String())
	var reqs []reconcile.Request
	if b.s.served != nil {
		reqs = b.s.served(false)
	}
	b.mu.Lock()
	b.current = nil
	b.mu.Unlock()
	inf := sw.bound.informer()
	_ = inf.RemoveListener(sw.reg)
	inf.Stop()
	for _, req := range reqs {
		b.w.add(req, false)
	}
}

// await asks discovery for the kind with backoff until it is served, then
// starts src, waits for its informer to sync and queues the requests
// served returns. It returns the watch, or nil when ctx ended or src
// could not be watched.
func (b *boundServed) await(ctx context.Context) *servedWatch {
	delay := servedPollMin
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		_, err := b.w.mgr.mapper.RESTMapping(b.gvk.GroupKind(), b.gvk.Version)
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) {
			b.w.log.V(1).Info("cannot tell whether the API server serves a kind yet", "source", b.String(), "kind", b.gvk.String(), "error", err.Error())
		}
		delay = min(2*delay, servedPollMax)
		timer.Reset(delay)
	}
	bound, err := b.s.src.bind(b.w)
	if err != nil {
		b.w.log.Error(err, "cannot watch a kind the API server now serves", "source", b.String())
		return nil
	}
	reg, err := bound.start(ctx)
	if err != nil {
		b.w.log.Error(err, "cannot watch a kind the API server now serves", "source", b.String())
		return nil
	}
	sw := &servedWatch{bound: bound, reg: reg}
	if err := bound.informer().WaitForSync(ctx); err != nil {
		_ = bound.informer().RemoveListener(reg)
		if ctx.Err() == nil {
			b.w.log.Error(err, "a kind the API server now serves did not sync", "source", b.String())
		}
		return nil
	}
	b.mu.Lock()
	b.current = sw
	b.mu.Unlock()
	b.w.log.Info("watching a kind the API server now serves", "source", bound.String())
	b.queueServed(true)
	return sw
}

// queueServed queues the requests served(serving) returns, as changes.
func (b *boundServed) queueServed(serving bool) {
	if b.s.served == nil {
		return
	}
	for _, req := range b.s.served(serving) {
		b.w.add(req, false)
	}
}

func (b *boundServed) informer() sourceInformer { return b }

// started returns the watch the controller's start made, while it lasts,
// else nil.
func (b *boundServed) started() *servedWatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current == nil || !b.current.atStart {
		return nil
	}
	return b.current
}

// WaitForSync waits for src's informer when the controller's start started
// it; a kind awaited in the background holds nothing back.
func (b *boundServed) WaitForSync(ctx context.Context) error {
	if sw := b.started(); sw != nil {
		return sw.bound.informer().WaitForSync(ctx)
	}
	return nil
}

// RemoveListener removes the listener start added, while its informer
// watches; run removes the others.
func (b *boundServed) RemoveListener(reg cache.ResourceEventHandlerRegistration) error {
	if sw := b.started(); sw != nil && reg != nil && sw.reg == reg {
		return sw.bound.informer().RemoveListener(reg)
	}
	return nil
}

// Stop stops src's informer when start made it and it still watches.
func (b *boundServed) Stop() {
	if sw := b.started(); sw != nil {
		sw.bound.informer().Stop()
	}
}

// kindSignals tells the sources made by WhenServed that a list or watch of
// their kind found no such resource (see Manager's cache errors). It is
// safe for concurrent use.
type kindSignals struct {
	mu sync.Mutex
	// subs holds the channels of each kind's subscribers; mu guards it.
	subs map[schema.GroupKind]map[chan struct{}]bool
}

// subscribe returns a channel that receives (at most one pending signal)
// when a list or watch of gk finds no such resource, and the function
// that unsubscribes it.
func (k *kindSignals) subscribe(gk schema.GroupKind) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.subs == nil {
		k.subs = map[schema.GroupKind]map[chan struct{}]bool{}
	}
	if k.subs[gk] == nil {
		k.subs[gk] = map[chan struct{}]bool{}
	}
	k.subs[gk][ch] = true
	return ch, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.subs[gk], ch)
	}
}

// signal tells gk's subscribers, without blocking.
func (k *kindSignals) signal(gk schema.GroupKind) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for ch := range k.subs[gk] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
