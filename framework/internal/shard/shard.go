package shard

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// Gate is all a controller knows of sharding: what its workers ask before
// dispatching a key. A sharded controller's is its *Primary.
type Gate interface {
	// Begin is called once the controller's informers synced, before its
	// workers start.
	Begin(ctx context.Context)
	// Freeze is called when the controller begins to stop, before its
	// workers stop taking keys.
	Freeze()
	// Admit decides whether req runs here. When it does (DispatchRun) it
	// returns the context to reconcile req on, fenced by req's bucket, and
	// done, to call when the reconcile returned; DispatchDrop (the keys of
	// a bucket another member holds, counted) and DispatchWait return
	// neither.
	Admit(ctx context.Context, req reconcile.Request) (context.Context, func(), Dispatch)
	// Status says where req's object falls in the ring.
	Status(req reconcile.Request) *introspect.ShardStatus
}

var _ Gate = (*Primary[object.Object])(nil)
var _ ring.User = (*Primary[object.Object])(nil)

// Dispatch says what a worker does with a key.
type Dispatch int

const (
	DispatchRun  Dispatch = iota // reconcile it here
	DispatchWait                 // its bucket is held here but not served yet: try again later
	DispatchDrop                 // another member holds its bucket
)

// Informer is what the reads of a bucket need of a source's informer,
// whatever the type of its objects.
type Informer interface {
	fmt.Stringer
	WaitForSync(ctx context.Context) error
	RemoveListener(reg cache.ResourceEventHandlerRegistration) error
	Stop()
}

// Listener is a source bound to the controller, reading one bucket: the
// source's informer, and Start, which registers the controller's listener
// on it.
type Listener struct {
	Informer Informer
	Start    func(ctx context.Context) (cache.ResourceEventHandlerRegistration, error)
}

// Source is a source of a sharded controller as the framework binds it:
// the primary kind, or a source read per bucket (see Primary.AddSecondary).
type Source interface {
	fmt.Stringer
	// Check reports what makes the source unusable, as binding it would.
	Check() error
	// Local reports whether every request the source queues for an
	// object is in the object's namespace.
	Local() bool
	// Kind returns the kind the source watches, without an informer.
	Kind() (schema.GroupVersionKind, error)
	// ReadsAs returns the example and selection of the source's
	// informers, as the cache's reads of them ask.
	ReadsAs() (object.Object, informers.Selection, error)
	// BindBucket binds the source to the controller, reading only the
	// objects sel selects.
	BindBucket(sel apisharding.Selector) (Listener, error)
}

// Hooks are what the controller's listener on a bucket's informer of the
// primary kind tells the Primary; each may be nil.
type Hooks[T object.Object] struct {
	// Delivered sees each added or updated object after its key was queued.
	Delivered func(T)
	// Changed says whether an object of the initial list carries a change
	// no earlier reconcile saw: it is queued as a change, not a replay.
	Changed func(T) bool
	// OnDelete sees each deleted object before its key is queued.
	OnDelete func(T)
}

// Bound is the primary kind bound to one bucket: its informer, and Start,
// which registers the controller's listener on it.
type Bound[T object.Object] struct {
	Informer *informers.Informer[T]
	Start    func(ctx context.Context) (cache.ResourceEventHandlerRegistration, error)
}

// Config is what New makes a Primary of.
type Config[T object.Object] struct {
	// Controller names the controller.
	Controller string
	// Kind is the controller's kind.
	Kind schema.GroupVersionKind
	// Source is the primary kind, as a source.
	Source Source
	// Bind binds the primary kind to the controller, reading only the
	// objects sel selects, its listener calling h.
	Bind func(sel apisharding.Selector, h Hooks[T]) (Bound[T], error)
	// Ring is the manager's ring, which must not have started; Holds
	// counts the holders of its bucket informers.
	Ring  *ring.Ring
	Holds *Holds
	// Cache is the manager's cache, whose reads of the controller's kinds
	// go to the held buckets' informers.
	Cache *informers.Cache
	// Dropped counts the keys dropped because another member holds their
	// bucket.
	Dropped interface{ Inc() }
}

// Admit is Gate.Admit.
func (p *Primary[T]) Admit(ctx context.Context, req reconcile.Request) (context.Context, func(), Dispatch) {
	b, d := p.enter(req)
	switch d {
	case DispatchDrop:
		p.dropped.Inc()
		return nil, nil, d
	case DispatchWait:
		return nil, nil, d
	}
	ctx, cancel := p.reconcileContext(ctx, b)
	return ctx, func() { cancel(); p.exit(req, b) }, DispatchRun
}

// Queued tells p the controller's queue, once made: owed visits the keys
// it still owes a worker. Call it before start.
func (p *Primary[T]) Queued(owed func(func(reconcile.Request, reconcile.Reason))) { p.owed = owed }

// KeepTombstones makes remember see each deleted primary object before
// its key is queued. Call it before start.
func (p *Primary[T]) KeepTombstones(remember func(T)) { p.onDelete = remember }

// Started is closed once the controller started.
func (p *Primary[T]) Started() <-chan struct{} { return p.started }

// Reading reports whether bucket b's informers are published.
func (p *Primary[T]) Reading(b int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads[b] != nil
}

// Len counts the informers held.
func (h *Holds) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.n)
}
