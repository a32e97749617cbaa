package framework

import (
	"context"
	"errors"

	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// gate is all a Controller knows of sharding: what its workers ask before
// dispatching a key. An unsharded controller has a nil gate; a sharded
// one's is its *shardedPrimary[T].
type gate interface {
	// begin is called once the controller's informers synced, before its
	// workers start.
	begin(ctx context.Context)
	// freeze is called when the controller begins to stop, before its
	// workers stop taking keys.
	freeze()
	// admit decides whether req runs here. When it does (dispatchRun) it
	// returns the context to reconcile req on, fenced by req's bucket, and
	// done, to call when the reconcile returned; dispatchDrop (the keys of
	// a bucket another member holds, counted) and dispatchWait return
	// neither.
	admit(ctx context.Context, req reconcile.Request) (context.Context, func(), dispatch)
	// status says where req's object falls in the ring.
	status(req reconcile.Request) *introspect.ShardStatus
}

// admit is gate.admit.
func (p *shardedPrimary[T]) admit(ctx context.Context, req reconcile.Request) (context.Context, func(), dispatch) {
	b, d := p.enter(req)
	switch d {
	case dispatchDrop:
		p.dropped.Inc()
		return nil, nil, d
	case dispatchWait:
		return nil, nil, d
	}
	ctx, cancel := p.reconcileContext(ctx, b)
	return ctx, func() { cancel(); p.exit(req, b) }, dispatchRun
}

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
// shardedPrimary, which the manager's ring drives.
type sharded[T object.Object] struct {
	p   *shardedPrimary[T]
	mgr *Manager
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
	p, err := newShardedPrimary(*primary, target, mgr.ring, &mgr.holds, c.name)
	if err != nil {
		return nil, err
	}
	p.dropped = mgr.metrics.ring.Dropped.WithLabelValues(mgr.ring.Options().Ring, c.name)
	c.primary, c.shard = p, p
	return sharded[T]{p: p, mgr: mgr}, nil
}

func (s sharded[T]) reader() informers.Reader[T] { return s.p }

func (s sharded[T]) claims(mgr *Manager, src Source, c *Controller) bool {
	return s.p.addSecondary(mgr, src, c.log)
}

func (s sharded[T]) queued(owed func(func(reconcile.Request, reconcile.Reason))) { s.p.owed = owed }

func (s sharded[T]) keepTombstones(remember func(T)) { s.p.onDelete = remember }

func (s sharded[T]) register() error {
	if err := s.mgr.ring.Register(s.p); err != nil {
		return err
	}
	if err := s.p.routeReads(s.mgr); err != nil {
		s.mgr.ring.Unregister(s.p)
		return err
	}
	return nil
}

func (s sharded[T]) unregister() { s.mgr.ring.Unregister(s.p) }
