package framework

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// Source is something a controller watches: objects of one kind in the shared
// cache, and the rule that turns their events into requests for the
// controller's own kind. Build one with Owned, OwnedByAny or Map; narrow it
// with WithSelection.
type Source interface {
	// String names the source for errors and logs.
	String() string

	// bind requests the source's informer from the cache (so it syncs with
	// the manager's caches) and ties the source to one controller.
	bind(w *watchTarget) (boundSource, error)
}

// boundSource is a Source tied to a controller, ready to deliver events.
type boundSource interface {
	// start registers the listener; events then flow into the controller's queue.
	start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error)
	// informer is the informer the source reads.
	informer() sourceInformer
	String() string
}

// sourceInformer is what a controller needs of a source's informer,
// whatever the type of its objects.
type sourceInformer interface {
	fmt.Stringer
	WaitForSync(ctx context.Context) error
	RemoveListener(reg cache.ResourceEventHandlerRegistration) error
	Stop()
}

var _ sourceInformer = (*informers.Informer[object.Object])(nil)

// watchTarget is what a source needs from the controller that watches it.
type watchTarget struct {
	mgr *Manager
	// cluster is the engaged cluster the sources read, nil for the
	// manager's own; its requests name it.
	cluster *cluster.Cluster
	name    string // controller name
	owner   schema.GroupVersionKind
	queue   workqueue.Enqueuer[reconcile.Request]
	log     logr.Logger
	// ownerScope caches whether owner is namespaced: 0 unknown, 1 yes, 2 no.
	ownerScope atomic.Int32
}

// kindSource watches objects of Go type C.
type kindSource[C object.Object] struct {
	example C // its dynamic type picks the informer
	sel     informers.Selection
	preds   []Predicate[C]
	// mapFn maps an object to requests; nil means "enqueue the controller
	// owner" (or every owner of the controller's kind, with anyOwner).
	mapFn    func(ctx context.Context, obj C) []reconcile.Request
	anyOwner bool
	// self enqueues the object's own key (the controller's primary kind).
	self bool
	// mapper is set for sources built by Map, whose mapFn must not be nil.
	mapper bool
	// sameNamespace is set by SameNamespace: mapFn returns requests in
	// the namespace of the object it maps only.
	sameNamespace bool
	// toLocal is set by ToLocal: the requests of a Map function are in the
	// manager's own cluster, whatever the cluster of the event.
	toLocal bool
	// others is set by InOtherClusters, with its engaged.
	others  bool
	engaged func(ctx context.Context) []reconcile.Request
	// resync is the listener's own resync period (ControllerOptions.
	// ResyncPeriod): zero for the cache's period for the kind, negative for
	// none.
	resync time.Duration
}

// boundKind is a kindSource bound to a controller: its informer hands the
// listener objects of type C.
type boundKind[C object.Object] struct {
	kindSource[C]
	w   *watchTarget
	inf *informers.Informer[C]
	// onDelete, when set, sees each deleted object that passes the
	// predicates before its key is queued; set before start.
	onDelete func(C)
	// changed, when set, says whether an object of the initial list
	// carries a change no earlier reconcile saw (a bucket handed over with
	// a mark): it is queued as a change, not a replay. delivered, when
	// set, sees each added or updated object after its key was queued.
	// Both are set before start.
	changed   func(C) bool
	delivered func(C)
	// bucket is set on a source bound to one bucket of a sharded
	// controller (bindShard); strayed once it mapped an object to a
	// request in another namespace, which it then logged.
	bucket  bool
	strayed atomic.Bool
}

// Owned watches objects like example and enqueues their controller owner
// (the owner reference with controller: true) when that owner is of the
// controller's kind. It is what Builder.Owns uses.
func Owned[C object.Object](example C, preds ...Predicate[C]) Source {
	return &kindSource[C]{example: example, preds: preds}
}

// OwnedByAny watches objects like example and enqueues every owner of the
// controller's kind among their owner references, controller or not: for
// objects several parents share, such as a ConfigMap that each of its
// consumers lists as an owner so it is deleted with the last of them.
func OwnedByAny[C object.Object](example C, preds ...Predicate[C]) Source {
	return &kindSource[C]{example: example, preds: preds, anyOwner: true}
}

// Map watches objects of type C and enqueues the requests fn returns for each
// event (for a deletion, fn sees the last state). fn runs on the informer's
// event goroutine: keep it fast and read only from the cache.
//
// cluster.From(ctx) is the cluster of the event. A request fn returns with
// an empty Cluster is in that cluster, so a function written for one
// cluster serves every cluster a controller watches (ControllerOptions.
// Clusters); a request naming a cluster is in that one.
func Map[C object.Object](fn func(ctx context.Context, obj C) []reconcile.Request, preds ...Predicate[C]) Source {
	return &kindSource[C]{preds: preds, mapFn: fn, mapper: true}
}

// SameNamespace marks src, a source built by Map, as one whose function
// maps each object only to requests in the object's own namespace, as
// Owned and OwnedByAny do by nature (owner references do not cross
// namespaces). A sharded controller whose ring shards by namespace
// (sharding.Options.Buckets.By = sharding.ByNamespace) reads such a source of
// a namespaced kind per held bucket, as it reads its own kind, instead of
// caching the kind whole in every member: the events of a namespace then
// reach only the member that holds its bucket. A request the function
// returns for another namespace is still queued, and logged once per
// bucket: the member holding that namespace does not see the event behind
// it. Other sources, and every source of a controller that is not sharded
// by namespace, are read as they are.
func SameNamespace(src Source) Source {
	s, ok := src.(interface{ withSameNamespace() Source })
	if !ok {
		return src
	}
	return s.withSameNamespace()
}

// ToLocal marks src, a source built by Map, as one whose requests are in
// the manager's own cluster, whatever cluster its events come from: a
// controller of many clusters (ControllerOptions.Clusters) then reconciles
// an object of its own cluster when an object it maps from changes in
// another. Without it, a request the function returns with an empty
// Cluster is in the cluster of the event. Other sources are returned as
// they are.
func ToLocal(src Source) Source {
	s, ok := src.(interface{ withToLocal() Source })
	if !ok {
		return src
	}
	return s.withToLocal()
}

// InOtherClusters makes src, a source built by Map, watch every engaged
// cluster other than the manager's own, and not the manager's own, with
// its requests in the manager's own cluster (as ToLocal's): how a
// controller of the manager's own cluster hears of the objects it keeps
// in others. Its informers of a cluster are made at its engagement and
// stop at its disengagement. engaged, when not nil, is called once they
// synced, and again each time the cluster turns healthy after its probes
// failed, ctx carrying the cluster (cluster.From), and the requests it
// returns are queued. Complete refuses it in a controller with
// ControllerOptions.Clusters.Remote, which binds every source to every
// cluster. Other sources are returned as they are.
func InOtherClusters(src Source, engaged func(ctx context.Context) []reconcile.Request) Source {
	s, ok := src.(interface {
		withOthers(func(context.Context) []reconcile.Request) Source
	})
	if !ok {
		return src
	}
	return s.withOthers(engaged)
}

func (s *kindSource[C]) withOthers(engaged func(context.Context) []reconcile.Request) Source {
	cp := *s
	cp.others, cp.toLocal, cp.engaged = s.mapper, s.mapper, engaged
	return &cp
}

func (s *kindSource[C]) withToLocal() Source {
	cp := *s
	cp.toLocal = s.mapper
	return &cp
}

func (s *kindSource[C]) withSameNamespace() Source {
	cp := *s
	cp.sameNamespace = true
	return &cp
}

// WithSelection returns src narrowed to the objects sel selects (namespace,
// labels, fields), or, for *unstructured.Unstructured,
// *metav1.PartialObjectMetadata and object.Object sources (a Map of
// object.Object, say), told which kind to watch.
func WithSelection(src Source, sel informers.Selection) Source {
	s, ok := src.(interface {
		withSelection(informers.Selection) Source
	})
	if !ok {
		return src
	}
	return s.withSelection(sel)
}

func (s *kindSource[C]) withSelection(sel informers.Selection) Source {
	cp := *s
	cp.sel = sel
	return &cp
}

func (s *kindSource[C]) String() string {
	return fmt.Sprintf("%s %v", s.role(), reflect.TypeFor[C]())
}

func (s *kindSource[C]) role() string {
	switch {
	case s.self:
		return "primary"
	case s.mapFn == nil && s.anyOwner:
		return "owned (any owner)"
	case s.mapFn == nil:
		return "owned"
	}
	return "mapped"
}

func (b *boundKind[C]) String() string { return b.role() + " " + b.inf.String() }

func (b *boundKind[C]) informer() sourceInformer { return b.inf }

// keepTombstones makes remember see the last state of each deleted object
// the source will queue, before its key is queued. Call it before start.
func (b *boundKind[C]) keepTombstones(remember func(C)) { b.onDelete = remember }

func (s *kindSource[C]) bind(w *watchTarget) (boundSource, error) {
	return s.bindKind(w)
}

// bucketSource is a source a sharded controller whose ring shards by
// namespace may read per held bucket: one whose requests are in the
// namespace of the object they come from.
type bucketSource interface {
	Source
	// check reports what makes the source unusable, as bind would.
	check() error
	// local reports whether every request the source queues for an
	// object is in the object's namespace.
	local() bool
	// kind returns the kind the source watches, without an informer.
	kind(mgr *Manager) (schema.GroupVersionKind, error)
	// readsAs returns the example and selection of the source's informers
	// (see kindSource.readAs).
	readsAs(mgr *Manager) (object.Object, informers.Selection, error)
	// bindShard binds the source to the controller of w, reading only the
	// objects shard selects.
	bindShard(w *watchTarget, shard apisharding.Selector) (boundSource, error)
}

var _ bucketSource = (*kindSource[object.Object])(nil)

// check reports what makes s unusable: a nil predicate, function or
// example.
func (s *kindSource[C]) check() error {
	if err := nilPredicate(s.preds); err != nil {
		return fmt.Errorf("watch %v: %w", s, err)
	}
	switch {
	case s.mapFn == nil && !s.self && s.mapper:
		return fmt.Errorf("watch %v: Map called with a nil function", s)
	case s.mapFn == nil && !s.self && typednil.Is(s.example):
		return fmt.Errorf("watch %v: %w", s, nilObject("Owned", s.example))
	}
	return nil
}

func (s *kindSource[C]) local() bool {
	return !s.self && (s.mapFn == nil || s.sameNamespace)
}

func (s *kindSource[C]) kind(mgr *Manager) (schema.GroupVersionKind, error) {
	if err := s.check(); err != nil {
		return schema.GroupVersionKind{}, err
	}
	example, sel, err := s.readAs(mgr)
	switch {
	case err != nil:
		return schema.GroupVersionKind{}, fmt.Errorf("%v: %w", s, err)
	case !sel.Kind.Empty():
		return sel.Kind, nil
	}
	gvk, err := client.KindOf(mgr.Scheme(), example)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("%v: %w (for unstructured and metadata objects, give the kind with a Selection: ControllerOptions.Selection for the controller's own kind, WithSelection for a watch)", s, err)
	}
	return gvk, nil
}

func (s *kindSource[C]) readsAs(mgr *Manager) (object.Object, informers.Selection, error) {
	return s.readAs(mgr)
}

func (s *kindSource[C]) bindShard(w *watchTarget, shard apisharding.Selector) (boundSource, error) {
	cp := *s
	cp.sel.Shard = shard
	b, err := cp.bindKind(w)
	if err != nil {
		return nil, err
	}
	b.bucket = true
	return b, nil
}

// bindKind binds s to the controller of w, with an informer of C.
func (s *kindSource[C]) bindKind(w *watchTarget) (*boundKind[C], error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	example, sel, err := s.readAs(w.mgr)
	if err != nil {
		return nil, fmt.Errorf("watch %v: %w", describeType(example), err)
	}
	c := w.mgr.cache
	if w.cluster != nil {
		c = w.cluster.Cache()
	}
	inf, err := informers.ForObject(c, example, sel)
	if err != nil {
		return nil, fmt.Errorf("watch %v: %w", describeType(example), err)
	}
	return &boundKind[C]{kindSource: *s, w: w, inf: inf}, nil
}

// readAs returns the example and the selection the source's informer is
// made with: what bind asks the cache for, and what a read must ask for to
// read the same informer (hooks.RouteReads).
func (s *kindSource[C]) readAs(mgr *Manager) (C, informers.Selection, error) {
	example, sel := s.example, s.sel
	rt := reflect.TypeFor[C]()
	switch {
	case !reflect.ValueOf(&example).Elem().IsZero():
		if sel.Kind.Empty() {
			sel.Kind = example.GetObjectKind().GroupVersionKind()
		}
		return example, sel, nil
	case rt.Kind() == reflect.Pointer && rt.Elem().Kind() == reflect.Struct:
		obj, ok := reflect.New(rt.Elem()).Interface().(C)
		if !ok {
			return example, sel, fmt.Errorf("type %v is not an object", rt)
		}
		return obj, sel, nil
	case !sel.Kind.Empty():
		// An interface type (object.Object): the kind says what to watch.
		example, err := newExample[C](mgr, sel.Kind)
		return example, sel, err
	}
	return example, sel, fmt.Errorf("type %v is not a pointer to a struct; give the kind with WithSelection", rt)
}

func (b *boundKind[C]) start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	return b.inf.AddListener(b.listener(ctx), b.handlerOptions())
}

// listener turns the informer's events into requests on the controller's queue.
func (b *boundKind[C]) listener(ctx context.Context) informers.ListenerFuncs[C] {
	s, w := &b.kindSource, b.w
	emit := func(e Change[C], replay bool) {
		if !passes(s.preds, e) {
			return
		}
		switch {
		case s.self:
			w.add(requestFor(e.Object), replay)
		case s.mapFn != nil:
			for _, req := range s.mapFn(ctx, e.Object) {
				if s.toLocal {
					w.addLocal(req, replay) // in the manager's own cluster
					continue
				}
				if b.bucket && req.Namespace != e.Object.GetNamespace() && b.strayed.CompareAndSwap(false, true) {
					w.log.Info("a source read per bucket (SameNamespace) mapped an object to a request in another namespace: this member sees only the events of its buckets' namespaces, so it may miss changes behind such requests",
						"source", b.String(), "object", cache.NewObjectName(e.Object.GetNamespace(), e.Object.GetName()).String(), "request", req.String())
				}
				w.add(req, replay)
			}
		case s.anyOwner:
			for _, req := range w.ownerRequests(e.Object, true) {
				w.add(req, replay)
			}
		default:
			if ref := metav1.GetControllerOfNoCopy(e.Object); ref != nil {
				if req, ok := w.ownerRequest(e.Object, ref); ok {
					w.add(req, replay)
				}
			}
		}
	}
	return informers.ListenerFuncs[C]{
		AddFunc: func(obj C, initial bool) {
			if initial && b.changed != nil && b.changed(obj) {
				initial = false
			}
			emit(Change[C]{Type: Added, Object: obj, Replay: initial}, initial)
			if b.delivered != nil {
				b.delivered(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj C) {
			resync := oldObj.GetResourceVersion() == newObj.GetResourceVersion()
			e := Change[C]{Type: Updated, Object: newObj, Old: oldObj, Replay: resync}
			emit(e, resync)
			if b.delivered != nil {
				b.delivered(newObj)
			}
			// An owned object moved to another owner: the old owner must
			// notice it lost a child.
			if !s.self && s.mapFn == nil && !resync && passes(s.preds, e) {
				now := w.ownerRequests(newObj, s.anyOwner)
				for _, req := range w.ownerRequests(oldObj, s.anyOwner) {
					if !slices.Contains(now, req) {
						w.add(req, false)
					}
				}
			}
		},
		DeleteFunc: func(obj C, _ bool) {
			e := Change[C]{Type: Deleted, Object: obj}
			if b.onDelete != nil && passes(s.preds, e) {
				b.onDelete(obj) // keep a tombstone only for deletions that will be reconciled
			}
			emit(e, false)
		},
	}
}

// newExample returns an empty object of kind gvk for a source of the
// interface type C: typed when the scheme knows the kind.
func newExample[C object.Object](mgr *Manager, gvk schema.GroupVersionKind) (C, error) {
	var zero C
	obj, err := client.NewObject(mgr.Scheme(), gvk)
	if err != nil {
		return zero, fmt.Errorf("%v: %w", gvk, err)
	}
	example, ok := obj.(C)
	if !ok {
		return zero, fmt.Errorf("%v: a %T is not a %v", gvk, obj, reflect.TypeFor[C]())
	}
	return example, nil
}

// describeType names the Go type of a source's objects: example's dynamic
// type when there is one, else C.
func describeType[C object.Object](example C) string {
	if t := reflect.TypeOf(any(example)); t != nil {
		return t.String()
	}
	return reflect.TypeFor[C]().String()
}

// handlerOptions asks the informer for the source's own resync period, if
// it has one.
func (s *kindSource[C]) handlerOptions() cache.HandlerOptions {
	switch {
	case s.resync > 0:
		return cache.HandlerOptions{ResyncPeriod: &s.resync}
	case s.resync < 0:
		var none time.Duration
		return cache.HandlerOptions{ResyncPeriod: &none}
	}
	return cache.HandlerOptions{}
}

// add queues req: behind real changes when it only replays cached state.
// A request that names no cluster is in the cluster of the event.
func (w *watchTarget) add(req reconcile.Request, replay bool) {
	if w.cluster != nil && req.Cluster == "" {
		req.Cluster = w.cluster.Name()
	}
	w.addLocal(req, replay)
}

// addLocal queues req as it is: a request that names no cluster is in the
// manager's own.
func (w *watchTarget) addLocal(req reconcile.Request, replay bool) {
	if replay {
		w.queue.AddReplay(req)
	} else {
		w.queue.Add(req)
	}
}

func requestFor(obj metav1.Object) reconcile.Request {
	return reconcile.Request{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// ownerRequests returns the requests for obj's owners of the watching
// controller's kind: its controller owner only, or every such owner when
// any is true.
func (w *watchTarget) ownerRequests(obj metav1.Object, any bool) []reconcile.Request {
	if !any {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			return nil
		}
		if req, ok := w.ownerRequest(obj, ref); ok {
			return []reconcile.Request{req}
		}
		return nil
	}
	var out []reconcile.Request
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if req, ok := w.ownerRequest(obj, &refs[i]); ok && !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	return out
}

// ownerRequest returns the request for ref, an owner reference of obj, when
// it names an object of the watching controller's kind.
func (w *watchTarget) ownerRequest(obj metav1.Object, ref *metav1.OwnerReference) (reconcile.Request, bool) {
	if ref.Kind != w.owner.Kind {
		return reconcile.Request{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != w.owner.Group {
		return reconcile.Request{}, false
	}
	req := reconcile.Request{Name: ref.Name}
	if w.ownerNamespaced() {
		req.Namespace = obj.GetNamespace()
	}
	return req, true
}

// ownerNamespaced reports whether the controller's kind is namespaced. Racing
// first lookups only repeat the mapping.
func (w *watchTarget) ownerNamespaced() bool {
	switch w.ownerScope.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	mapper := w.mgr.mapper
	if w.cluster != nil {
		mapper = w.cluster.RESTMapper()
	}
	m, err := mapper.RESTMapping(w.owner.GroupKind(), w.owner.Version)
	if err != nil {
		return true // unknown yet: most kinds are namespaced; not cached
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		w.ownerScope.Store(1)
		return true
	}
	w.ownerScope.Store(2)
	return false
}
