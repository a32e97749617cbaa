package framework

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework/internal/served"
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
// shard.Primary.AddSecondary), which need no waiting.

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
// making an informer: that waits for the controller's start (see
// served.Kind).
func (s *servedSource) bind(w *watchTarget) (boundSource, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	gvk, err := s.kind(w.mgr)
	if err != nil {
		return nil, fmt.Errorf("watch %v: %w", s, err)
	}
	return boundServed{&served.Kind{
		Name:    s.String(),
		GVK:     gvk,
		Mapper:  w.mgr.mapper,
		Signals: w.mgr.notFound,
		Log:     w.log,
		Bind: func(ctx context.Context) (served.Watch, error) {
			bound, err := s.src.bind(w)
			if err != nil {
				return served.Watch{}, err
			}
			reg, err := bound.start(ctx)
			if err != nil {
				return served.Watch{}, err
			}
			return served.Watch{Informer: bound.informer(), Reg: reg, Name: bound.String()}, nil
		},
		Served: s.served,
		Queue:  func(req reconcile.Request) { w.add(req, false) },
	}}, nil
}

// boundServed is a servedSource bound to a controller.
type boundServed struct{ *served.Kind }

var (
	_ boundSource    = boundServed{}
	_ sourceInformer = boundServed{}
)

func (b boundServed) start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	return b.Start(ctx)
}

func (b boundServed) informer() sourceInformer { return b }
