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

// WhenServed returns src made to watch its kind only once the API server
// serves it: a custom resource whose CRD may be installed after the
// controller starts, or never.
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
// listener, waits for the informer to sync and queues the requests served
// returns (the objects that waited for the kind; nil means none).
// served is called once: at the controller's start, before its workers
// run, when the kind is served then, else once its informer synced. It
// must not block.
//
// src is a source built by Owned, OwnedByAny or Map, to which
// WithSelection and SameNamespace are applied before WhenServed, as they
// do not see through it. In a sharded controller whose ring shards by
// namespace, a source whose kind is served when the controller is built is
// read per held bucket as src would be; one whose kind is not is read whole
// once served.
func WhenServed(src Source, served func() []reconcile.Request) Source {
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
	served func() []reconcile.Request // nil: queue nothing
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

// boundServed is a servedSource bound to a controller. Until its kind is
// served it has no informer: it is its own sourceInformer, synced and
// without listeners.
type boundServed struct {
	s   *servedSource
	w   *watchTarget
	gvk schema.GroupVersionKind

	mu sync.Mutex
	// bound is src bound to the controller once its kind was found served
	// at the start, nil otherwise; mu guards it.
	bound boundSource
}

var (
	_ boundSource    = (*boundServed)(nil)
	_ sourceInformer = (*boundServed)(nil)
)

func (b *boundServed) String() string { return b.s.String() }

// start starts src at once when its kind is served, or the mapper cannot
// tell; otherwise it waits for the kind in the background, until ctx ends.
func (b *boundServed) start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	_, err := b.w.mgr.mapper.RESTMapping(b.gvk.GroupKind(), b.gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		b.w.log.Info("not watching a kind the API server does not serve; watching it once it is (is its CRD installed?)", "source", b.String(), "kind", b.gvk.String())
		go b.await(ctx)
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
	b.mu.Lock()
	b.bound = bound
	b.mu.Unlock()
	b.queueServed()
	return reg, nil
}

// await asks discovery for the kind with backoff until it is served, then
// starts src, waits for its informer to sync, queues the requests served
// returns, and removes src's listener once ctx ends.
func (b *boundServed) await(ctx context.Context) {
	delay := servedPollMin
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
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
		return
	}
	reg, err := bound.start(ctx)
	if err != nil {
		b.w.log.Error(err, "cannot watch a kind the API server now serves", "source", b.String())
		return
	}
	defer func() { _ = bound.informer().RemoveListener(reg) }()
	if err := bound.informer().WaitForSync(ctx); err != nil {
		if ctx.Err() == nil {
			b.w.log.Error(err, "a kind the API server now serves did not sync", "source", b.String())
		}
		return
	}
	b.w.log.Info("watching a kind the API server now serves", "source", bound.String())
	b.queueServed()
	<-ctx.Done()
}

// queueServed queues the requests served returns, as changes.
func (b *boundServed) queueServed() {
	if b.s.served == nil {
		return
	}
	for _, req := range b.s.served() {
		b.w.add(req, false)
	}
}

func (b *boundServed) informer() sourceInformer { return b }

// boundInformer returns the informer of src when it was started by start,
// else nil.
func (b *boundServed) boundInformer() sourceInformer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bound == nil {
		return nil
	}
	return b.bound.informer()
}

// WaitForSync waits for src's informer when the controller's start started
// it; a kind awaited in the background holds nothing back.
func (b *boundServed) WaitForSync(ctx context.Context) error {
	if inf := b.boundInformer(); inf != nil {
		return inf.WaitForSync(ctx)
	}
	return nil
}

// RemoveListener removes the listener start added; await removes its own.
func (b *boundServed) RemoveListener(reg cache.ResourceEventHandlerRegistration) error {
	if inf := b.boundInformer(); inf != nil && reg != nil {
		return inf.RemoveListener(reg)
	}
	return nil
}

// Stop stops src's informer when start made it.
func (b *boundServed) Stop() {
	if inf := b.boundInformer(); inf != nil {
		inf.Stop()
	}
}
