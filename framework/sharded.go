package framework

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"

	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/internal/shard"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// gate is a sharded controller's shard.Gate, all the Controller knows of
// sharding; status is its Status, as the debug page asks it.
type gate struct{ shard.Gate }

func (g *gate) status(req reconcile.Request) *introspect.ShardStatus { return g.Status(req) }

// primaryBinding is the primary source of a controller as Builder.build
// wires it: its informer (unsharded) or the informers of the buckets this
// member holds (sharded, see bindSharded).
type primaryBinding[T object.Object] interface {
	reader() informers.Reader[T]
	// claims reports whether the binding reads src itself (per bucket),
	// so that build does not bind it.
	claims(mgr *Manager, src Source, c *Controller) bool
	// queued tells the binding the controller's queue, once made.
	queued(owed func(func(reconcile.Request, reconcile.Reason)))
	// keepTombstones makes remember see each deleted primary object.
	keepTombstones(remember func(T))
	// register joins the controller to what drives the binding; unregister
	// undoes it, when the manager refused the controller.
	register() error
	unregister()
}

// unsharded is the primary binding of a controller that is not sharded:
// one informer of the kind, which the cache owns.
type unsharded[T object.Object] struct{ bound *boundKind[T] }

func (u unsharded[T]) reader() informers.Reader[T]                          { return u.bound.inf }
func (unsharded[T]) claims(*Manager, Source, *Controller) bool              { return false }
func (unsharded[T]) queued(func(func(reconcile.Request, reconcile.Reason))) {}
func (u unsharded[T]) keepTombstones(remember func(T))                      { u.bound.keepTombstones(remember) }
func (unsharded[T]) register() error                                        { return nil }
func (unsharded[T]) unregister()                                            {}

// bindPrimary binds the primary source of controller c, sharded or not,
// and sets c's kind, primary and gate.
func bindPrimary[T object.Object](c *Controller, primary *kindSource[T], target *watchTarget) (primaryBinding[T], error) {
	if c.opts.Sharded {
		return bindSharded(c, primary, target)
	}
	bound, err := primary.bindKind(target)
	if err != nil {
		return nil, err
	}
	c.kind = bound.inf.Kind()
	c.primary = bound.inf
	c.sources = append(c.sources, bound)
	return unsharded[T]{bound}, nil
}

// sharded is the primary binding of a sharded controller: its
// shard.Primary, which the manager's ring drives.
type sharded[T object.Object] struct {
	p *shard.Primary[T]
	w *watchTarget
}

// bindSharded binds the primary source of sharded controller c to the
// manager's ring, which must not have started.
func bindSharded[T object.Object](c *Controller, primary *kindSource[T], target *watchTarget) (primaryBinding[T], error) {
	mgr := c.mgr
	if mgr.ring == nil {
		return nil, errors.New("ControllerOptions.Sharded needs a sharding ring: set Options.Sharding.Ring on the manager")
	}
	mgr.mu.Lock()
	started := mgr.started
	mgr.mu.Unlock()
	if started { // ring.Register checks again, for a Start meanwhile
		return nil, ring.ErrStarted
	}
	kind, err := primary.kind(mgr)
	if err != nil {
		return nil, err
	}
	c.kind = kind
	primary.sel.Kind = kind
	p, err := shard.New(shard.Config[T]{
		Controller: c.name, Kind: kind, Source: shardSource{primary, target},
		Bind: func(sel apisharding.Selector, h shard.Hooks[T]) (shard.Bound[T], error) {
			s := *primary
			s.sel.Shard = sel
			b, err := s.bindKind(target)
			if err != nil {
				return shard.Bound[T]{}, err
			}
			b.delivered, b.changed, b.onDelete = h.Delivered, h.Changed, h.OnDelete
			return shard.Bound[T]{Informer: b.inf, Start: b.start}, nil
		},
		Ring: mgr.ring, Holds: &mgr.holds, Cache: mgr.cache,
		Dropped: mgr.ringMetrics.Dropped.WithLabelValues(mgr.ring.Options().Ring, c.name),
	})
	if err != nil {
		return nil, err
	}
	c.primary, c.shard = p, &gate{p}
	return sharded[T]{p: p, w: target}, nil
}

func (s sharded[T]) claims(mgr *Manager, src Source, c *Controller) bool {
	bs, ok := src.(bucketSource)
	return ok && s.p.AddSecondary(shardSource{bs, s.w}, mgr.mapper, c.log)
}

func (s sharded[T]) reader() informers.Reader[T]                                 { return s.p }
func (s sharded[T]) queued(owed func(func(reconcile.Request, reconcile.Reason))) { s.p.Queued(owed) }
func (s sharded[T]) keepTombstones(remember func(T))                             { s.p.KeepTombstones(remember) }
func (s sharded[T]) register() error                                             { return s.p.Register() }
func (s sharded[T]) unregister()                                                 { s.p.Unregister() }

// shardSource is a bucketSource of the controller of w, as shard.Source.
type shardSource struct {
	bs bucketSource
	w  *watchTarget
}

func (s shardSource) String() string                         { return s.bs.String() }
func (s shardSource) Check() error                           { return s.bs.check() }
func (s shardSource) Local() bool                            { return s.bs.local() }
func (s shardSource) Kind() (schema.GroupVersionKind, error) { return s.bs.kind(s.w.mgr) }
func (s shardSource) ReadsAs() (object.Object, informers.Selection, error) {
	return s.bs.readsAs(s.w.mgr)
}

func (s shardSource) BindBucket(sel apisharding.Selector) (shard.Listener, error) {
	b, err := s.bs.bindShard(s.w, sel)
	if err != nil {
		return shard.Listener{}, err
	}
	return shard.Listener{Informer: b.informer(), Start: b.start}, nil
}
