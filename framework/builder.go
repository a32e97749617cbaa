package framework

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/internal/adapter"
	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// Builder assembles a controller for objects of kind T. The one way to wire
// a controller is
//
//	err := framework.NewBuilder[T](mgr, name, opts).Owns(child).Complete(r)
//
// NewBuilder starts it; WithPredicates, Owns, OwnsMetadata and Watches add
// filters and sources; Complete (or CompleteByKey, for a reconciler that
// reads by key) builds the controller and adds it to the manager. Errors are
// collected and returned by that last call, each naming the controller and
// what was wrong. Build is Complete for callers that also need the
// *Controller (its name or queue length, in tests and tools).
type Builder[T object.Object] struct {
	mgr     *Manager
	name    string
	opts    ControllerOptions
	preds   []Predicate[T]
	sources []Source
	others  []Source // of sources, those of InOtherClusters
	errs    []error
}

// NewBuilder starts building a controller named name (unique within the
// manager; it labels logs and metrics) for objects of kind T, a pointer to an
// API type registered in the manager's scheme.
//
// The controller reconciles every T the cache holds (narrowed by
// opts.Selection): equivalent to Watches on T's own key, with predicates from
// WithPredicates.
func NewBuilder[T object.Object](mgr *Manager, name string, opts ControllerOptions) *Builder[T] {
	b := &Builder[T]{mgr: mgr, name: name, opts: opts}
	if mgr == nil {
		b.errs = append(b.errs, errors.New("manager is nil"))
	}
	if name == "" {
		b.errs = append(b.errs, errors.New("controller name is empty"))
	}
	if err := opts.validate(); err != nil {
		b.errs = append(b.errs, err)
	}
	return b
}

// WithPredicates filters the changes of the primary kind T: a change enqueues
// its object only when every predicate accepts it.
func (b *Builder[T]) WithPredicates(preds ...Predicate[T]) *Builder[T] {
	if err := nilPredicate(preds); err != nil {
		b.errs = append(b.errs, fmt.Errorf("WithPredicates: %w", err))
		return b
	}
	b.preds = append(b.preds, preds...)
	return b
}

// Owns watches objects of obj's type and reconciles their controller owner
// when it is a T: equivalent to Watches(Owned(obj)).
func (b *Builder[T]) Owns(obj object.Object) *Builder[T] {
	if err := nilObject("Owns", obj); err != nil {
		b.errs = append(b.errs, err)
		return b
	}
	return b.Watches(Owned(obj))
}

// OwnsMetadata is Owns for objects whose metadata is all the controller
// reads (it needs their owner references, labels, annotations): it caches
// *metav1.PartialObjectMetadata of obj's kind instead of whole objects, so
// that a controller owning Secrets or large ConfigMaps holds none of their
// data. obj only names the kind (a typed object registered in the scheme, or
// an unstructured or metadata object with apiVersion and kind). Equivalent
// to Watches(WithSelection(Owned(&metav1.PartialObjectMetadata{}),
// informers.Selection{Kind: obj's kind})).
//
// Reads of those objects that should come from the same informer ask for
// *metav1.PartialObjectMetadata with that kind; a read of the typed object
// starts a second informer holding whole objects.
func (b *Builder[T]) OwnsMetadata(obj object.Object) *Builder[T] {
	if err := nilObject("OwnsMetadata", obj); err != nil {
		b.errs = append(b.errs, err)
		return b
	}
	if b.mgr == nil {
		return b // NewBuilder recorded it
	}
	gvk, err := client.KindOf(b.mgr.Scheme(), obj)
	if err != nil {
		b.errs = append(b.errs, fmt.Errorf("OwnsMetadata %T: %w", obj, err))
		return b
	}
	return b.Watches(WithSelection(Owned(&metav1.PartialObjectMetadata{}), informers.Selection{Kind: gvk}))
}

// Watches adds a source (see Owned, Map and WithSelection).
func (b *Builder[T]) Watches(src Source) *Builder[T] {
	if typednil.Is(src) {
		b.errs = append(b.errs, errors.New("Watches called with a nil Source"))
		return b
	}
	b.sources = append(b.sources, src)
	return b
}

// Complete builds the controller with a reconciler that is handed each
// object from the cache (and, if it implements reconcile.DeletionReconciler,
// a tombstone for each deleted one), and adds it to the manager.
func (b *Builder[T]) Complete(r reconcile.ObjectReconciler[T]) error {
	_, err := b.build(nil, r)
	return err
}

// CompleteByKey builds the controller with a reconciler that is handed only
// the object's namespace and name, and adds it to the manager.
func (b *Builder[T]) CompleteByKey(r reconcile.Reconciler) error {
	_, err := b.build(r, nil)
	return err
}

// Build is Complete that also returns the controller, for callers that want
// its name or queue length (tests, tools); a controller needs no handle to
// run. The controller is already added to the manager.
func (b *Builder[T]) Build(r reconcile.ObjectReconciler[T]) (*Controller, error) {
	return b.build(nil, r)
}

// SourceProvider is the optional interface of reconcilers that know what
// they must watch (a declarative reconciler watches the kinds of children it
// creates). Complete checks for it with a type assertion and adds the
// sources it returns; an error fails Complete.
type SourceProvider interface {
	Sources() ([]Source, error)
}

func (b *Builder[T]) build(byKey reconcile.Reconciler, byObject reconcile.ObjectReconciler[T]) (*Controller, error) {
	if typednil.Is(byKey) && typednil.Is(byObject) {
		b.errs = append(b.errs, errors.New("reconciler is nil"))
	}
	b.addProvidedSources(byKey, byObject)
	if len(b.errs) > 0 {
		return nil, b.fail(b.errs...)
	}
	mgr := b.mgr
	opts := b.opts.withDefaults(mgr)
	c := &Controller{
		name:  b.name,
		mgr:   mgr,
		opts:  opts,
		log:   opts.Logger.WithValues("controller", b.name),
		local: mgr.clusters.Local(),
	}
	// Bind every source first: binding can fail (a kind missing from the
	// scheme), and a failed build must leave nothing behind.
	primary := &kindSource[T]{self: true, sel: opts.Selection, preds: b.preds, resync: opts.ResyncPeriod}
	target := &watchTarget{mgr: mgr, name: b.name, log: c.log}
	pb, err := bindPrimary(c, primary, target)
	if err != nil {
		return nil, b.fail(err)
	}
	target.owner = c.kind
	if errs := b.bindSources(c, target, pb); len(errs) > 0 {
		return nil, b.fail(errs...)
	}
	if err := mgr.claimName(b.name); err != nil {
		return nil, err
	}
	b.instrument(c)
	qopts := workqueue.Options[reconcile.Request]{
		Name:            b.name,
		RateLimiter:     opts.RateLimiter,
		MetricsProvider: mgr.metrics.Queue,
	}
	if opts.Clusters.Remote {
		qopts.Flow, qopts.FlowLimit = clusterFlow, max(1, opts.Workers-1)
	}
	q := workqueue.New(qopts)
	c.queue, target.queue = q, q
	pb.queued(func(fn func(reconcile.Request, reconcile.Reason)) { hooks.Owed(q, fn) })

	var tombstones func(cluster string) func(T)
	if byObject != nil {
		local := pb.reader()
		a := adapter.New(byObject, func(name string) informers.Reader[T] {
			if name == "" {
				return local
			}
			if b := c.remote.Get(name); b != nil {
				return b.Reader.(informers.Reader[T])
			}
			return nil
		})
		if remember := a.Remember(""); remember != nil {
			pb.keepTombstones(remember)
			tombstones = a.Remember
		}
		byKey = a
	}
	c.reconciler = byKey
	c.remote = b.bindClusters(c, primary, q, tombstones)
	if err := pb.register(); err != nil {
		return nil, b.fail(err)
	}
	if err := mgr.Add(c); err != nil {
		pb.unregister()
		return nil, b.fail(err)
	}
	mgr.addInspected(c)
	if c.remote != nil {
		mgr.clusters.Subscribe(c.remote)
	}
	return c, nil
}

// addProvidedSources adds the sources of the reconcilers that provide
// them (SourceProvider), and their errors to b's.
func (b *Builder[T]) addProvidedSources(byKey reconcile.Reconciler, byObject reconcile.ObjectReconciler[T]) {
	for _, r := range []any{byKey, byObject} {
		if sp, ok := r.(SourceProvider); ok && !typednil.Is(r) {
			srcs, err := sp.Sources()
			if err != nil {
				b.errs = append(b.errs, err)
			}
			b.sources = append(b.sources, srcs...)
		}
	}
}

// bindSources binds b's sources to target, but those the primary binding
// reads itself, and records the kinds c watches.
func (b *Builder[T]) bindSources(c *Controller, target *watchTarget, pb primaryBinding[T]) []error {
	var errs []error
	for _, src := range b.sources {
		if bs, ok := src.(bucketSource); ok {
			if gvk, err := bs.kind(b.mgr); err == nil && gvk != c.kind && !slices.Contains(c.watched, gvk) {
				c.watched = append(c.watched, gvk)
			}
		}
		if o, ok := src.(otherSource); ok && o.inOthers() {
			b.others = append(b.others, src) // bound per cluster (InOtherClusters)
			if b.opts.Clusters.Remote {
				errs = append(errs, fmt.Errorf("watch %v: InOtherClusters in a controller of every cluster (ControllerOptions.Clusters.Remote), which binds each source to every cluster: use ToLocal", src))
			}
			continue
		}
		if pb.claims(b.mgr, src, c) {
			continue
		}
		s, err := src.bind(target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.sources = append(c.sources, s)
	}
	return errs
}

// instrument gives c its log sink, tracer, metrics and history.
func (b *Builder[T]) instrument(c *Controller) {
	c.deeper = reconcilelog.Deeper(c.opts.Logger.GetSink())
	if tp := b.mgr.opts.TracerProvider; tp != nil {
		c.tracer = tp.Tracer("github.com/converge-dev/converge/framework")
	}
	c.metrics = b.mgr.metrics.ForController(b.name, c.opts.Workers)
	c.history = history.New(c.opts.HistoryKeys)
}

func (b *Builder[T]) fail(errs ...error) error {
	return fmt.Errorf("controller %q for %v: %w", b.name, reflect.TypeFor[T](), errors.Join(errs...))
}

// nilObject says what is wrong when method is given a nil object (a nil
// interface, or a typed nil pointer, named with the empty literal to pass
// instead), or returns nil.
func nilObject(method string, obj any) error {
	switch {
	case reflect.TypeOf(obj) == nil:
		return fmt.Errorf("%s called with a nil object", method)
	case typednil.Is(obj):
		return fmt.Errorf("%s called with a nil %T: pass an empty object, such as %s", method, obj, emptyLiteral(obj))
	}
	return nil
}

// emptyLiteral spells an empty object of obj's type, a pointer to a struct:
// "&v1.ConfigMap{}".
func emptyLiteral(obj any) string {
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		return "&" + t.Elem().String() + "{}"
	}
	return t.String() + "{}"
}

// nilPredicate names the first nil predicate of preds.
func nilPredicate[T object.Object](preds []Predicate[T]) error {
	for i, p := range preds {
		if p == nil {
			return fmt.Errorf("predicate %d is nil", i)
		}
	}
	return nil
}
