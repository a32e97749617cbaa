package declarative

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/tools/events"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// State is what should exist for one parent.
//
// The zero State deletes every child and leaves the status alone. To leave
// everything as it is (Desired cannot decide yet: a spec it cannot use, a
// dependency not there), return State{KeepChildren: true}, with Events
// saying why if that helps, and a RequeueAfter if time will tell.
type State struct {
	// Children are the objects that should exist: typed API objects,
	// *unstructured.Unstructured, or client-go apply configurations. Each
	// needs a name; namespaced children without a namespace get the
	// parent's, and must be in the namespace the manager's cache holds, if
	// it holds one, and in a controller sharded by namespace, in a
	// namespaced parent's namespace. Every child's kind must be listed in
	// Options.ChildKinds.
	// Children left out are deleted.
	//
	// converge applies, and so owns, exactly the fields a child sets, never
	// its status or server-set metadata. An unstructured child sets the
	// fields it holds. A typed child (API object or apply configuration)
	// sets its non-nil pointers, whatever they point to, and its other
	// fields that hold a non-zero value: a field at its zero value (0, "",
	// false, a zero IntOrString or Quantity, a struct none of whose fields
	// is set) is left out, as the Kubernetes API conventions make every
	// field whose zero value means something a pointer. List elements and
	// map values are always set.
	//
	// A child is only ever applied over an object the parent owns (see the
	// package documentation): an existing object of the same name that is
	// someone else's is left untouched and reported, unless the child is
	// wrapped with Adopt and no other owner controls the object.
	Children []any

	// KeepChildren leaves the children as they are: nothing is applied,
	// nothing deleted (and converge's finalizer is not added). Children must
	// then be empty. Zero (false) means the children are made to match
	// Children.
	KeepChildren bool

	// Status is the parent's desired status (the value of its status field,
	// e.g. a StaticSiteStatus), applied to the status subresource; a parent
	// kind without one fails the reconcile. Nil means the status is not
	// written.
	Status any

	// Events are Kubernetes Events to record on the parent, in order (see
	// Event). Desired runs on every reconcile, and so each event is recorded
	// each time Desired returns it: client-go folds repeats within minutes
	// into one Event with a count, but return an event when something
	// happens (a decision changes), not as long as a state lasts. Events are
	// recorded whether or not applying the rest of the State succeeds. Nil
	// means none.
	Events []Event

	// RequeueAfter asks for another reconcile after this long, for state that
	// depends on time. Zero means none.
	RequeueAfter time.Duration
}

// Reconciler computes the desired state of a parent. It must not write to the
// cluster itself: it returns what should exist, and converge makes it so
// (Kubernetes Events included: see State.Events). The parent is shared with
// the cache: do not modify it.
//
// Desired may read the parent's live children (their status, say) with
// LiveChild and LiveChildren and the context it is given: a change to a
// child reconciles its parent.
//
// When Desired returns an error, or panics, nothing is applied or deleted
// and no State.Events are recorded: the parent's Ready condition (when its
// status can hold conditions) is set False with reason DesiredFailedReason
// and the error, the reconcile notes the same as its reconcile.Blocker, and
// a Warning Event of that reason is recorded once per change of the error.
// The error then reaches the framework unchanged: reconcile.Terminal(err)
// is not retried until something changes, any other error is retried with
// backoff (see package reconcile); a panic is counted, logged with its
// stack and retried as any reconcile panic. To leave everything as it is
// without an error, return State{KeepChildren: true}.
type Reconciler[T object.Object] interface {
	Desired(ctx context.Context, parent T) (State, error)
}

// Func adapts a function to a Reconciler.
type Func[T object.Object] func(ctx context.Context, parent T) (State, error)

// Desired calls f(ctx, parent).
func (f Func[T]) Desired(ctx context.Context, parent T) (State, error) { return f(ctx, parent) }

var _ Reconciler[object.Object] = Func[object.Object](nil)

// Finalizer is the optional interface of Reconcilers with cleanup to do
// before their parent is deleted (outside the cluster, usually). New checks
// for it with a type assertion. Finalize may run more than once for one
// deletion (if removing the finalizer fails): make it idempotent.
type Finalizer[T object.Object] interface {
	Finalize(ctx context.Context, parent T) error
}

// Labels and annotations converge puts on every child.
const (
	// ParentUIDLabel holds the parent's UID.
	ParentUIDLabel = "converge.dev/parent-uid"
	// ManagerLabel holds the field manager of the controller that made the child.
	ManagerLabel = "converge.dev/manager"
	// ParentAnnotation holds the parent's "namespace/name" (or "name").
	ParentAnnotation = "converge.dev/parent"
	// AppliedAnnotation holds a hash of what was last applied.
	AppliedAnnotation = "converge.dev/applied"
	// ClaimAnnotation, on a child no owner reference can reach, holds the
	// claim its parent's LedgerAnnotation recorded before converge
	// created it.
	ClaimAnnotation = "converge.dev/claim"
)

// LedgerAnnotation, on a parent, is the ledger of the children converge
// created or adopted for it that no owner reference can reach (a namespaced
// parent's children in other namespaces, or cluster-scoped ones) or that
// are retained (see Child.Retain): the
// parent's own UID, then one "UID=Kind.group/namespace/name" per child (or
// "?claim=..." for a child being created, see ClaimAnnotation), separated
// by spaces. It is what proves such a child the parent's (see the package
// documentation); a ledger that does not start with the parent's UID, such
// as one copied with another parent's YAML, proves nothing. converge writes
// it with the field manager FieldManager + "-ledger".
const LedgerAnnotation = "converge.dev/children"

// Declarative is a reconcile.ObjectReconciler[T] that applies the State a
// Reconciler computes. Build one with New and pass it to a framework
// Builder's Complete.
type Declarative[T object.Object] struct {
	mgr       *framework.Manager
	client    *client.Client
	r         Reconciler[T]
	finalize  Finalizer[T] // nil: no user cleanup
	opts      Options
	parentGVK schema.GroupVersionKind
	// children maps each child kind to its example and informer.
	children map[schema.GroupKind]*childKind
	// recorder records State.Events and ownership conflicts on parents.
	recorder events.EventRecorder
	// statuses remembers the status last applied to each parent.
	statuses statusMemory
	// appliedChildren remembers what was last applied to each child.
	appliedChildren childMemory
	// live reads children from the API server where the cache may lag.
	live metadata.Interface
	// conflicts reconciles a parent again when an object it conflicts
	// with changes.
	conflicts conflictWatch
	// schemas decides from the API server's schemas whether an apply
	// would change a child.
	schemas *schemas
	// ledger proves which label-linked children are the parents'.
	ledger ledger
	// kindWaits remembers the parents waiting for a child kind to be
	// served.
	kindWaits kindWaits
	// clusterWaits remembers the parents waiting for a cluster to be
	// engaged and healthy (see Child.InCluster).
	clusterWaits waits[string]
	// runs remembers which run-once children ran.
	runs runs
	// invalids remembers the declaration errors reported with an Event.
	invalids reportedErrors
	// reruns remembers the Jobs that rerun after their TTL reported with an
	// Event (see RerunAfterTTLReason).
	reruns reportedErrors
	// local is the manager's own cluster, where parents are; sites holds
	// the other clusters children were put in (see Child.InCluster).
	local *site
	sites sites
}

// childKind is one kind of child: its kind, the example object from
// Options.ChildKinds, and the cache's informer for it.
type childKind struct {
	gvk     schema.GroupVersionKind
	example object.Object
	// read is an empty object of the type the cache holds for the kind.
	read object.Object
	// cached reads the kind from the manager's cache: its informer, or the
	// informers of the held buckets when the controller is sharded by
	// namespace.
	cached *informers.KindReader[object.Object]
	// required is set for the kinds in Options.RequiredKinds.
	required bool
	// served is set once the API server is known to serve the kind (see
	// served.go); a required kind is.
	served atomic.Bool
}

var (
	_ reconcile.ObjectReconciler[object.Object] = (*Declarative[object.Object])(nil)
	_ framework.SourceProvider                  = (*Declarative[object.Object])(nil)
)

// New returns a declarative reconciler for parents of kind T. Pass it to the
// Complete of a framework.NewBuilder[T].
//
// New fails on a configuration error: a nil manager or reconciler, a
// parent or child type missing from the manager's scheme, Options breaking
// a rule (every rule broken is named). It works in two steps: it checks the
// arguments and Options, which has no side effects, then gets the cache's
// informer for every child kind, so that Options that break a rule make no
// informer.
func New[T object.Object](mgr *framework.Manager, r Reconciler[T], opts Options) (*Declarative[T], error) {
	if mgr == nil || typednil.Is(r) {
		return nil, errors.New("declarative.New: manager and reconciler must not be nil")
	}
	var zero T
	parent := reflect.New(reflect.TypeOf(zero).Elem()).Interface().(object.Object)
	gvks, _, err := mgr.Scheme().ObjectKinds(parent)
	if err != nil {
		return nil, fmt.Errorf("declarative: parent type %T is not registered in the manager's scheme: %w", parent, err)
	}
	parentGVK := gvks[0]
	opts = opts.withDefaults(parentGVK.Kind)
	if err := opts.validate(mgr.Scheme()); err != nil {
		return nil, err
	}
	live, err := metadata.NewForConfig(mgr.Config())
	if err != nil {
		return nil, fmt.Errorf("declarative: metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.Config())
	if err != nil {
		return nil, fmt.Errorf("declarative: discovery client: %w", err)
	}
	children, err := childKinds(mgr.Cache(), mgr.Scheme(), opts.ChildKinds)
	if err != nil {
		return nil, err
	}
	for gk := range requiredKinds(opts.RequiredKinds, func(ex object.Object) (schema.GroupVersionKind, error) { return childGVK(mgr.Scheme(), ex) }) {
		children[gk].required = true
		children[gk].served.Store(true) // or the controller does not start
	}
	d := &Declarative[T]{
		mgr:       mgr,
		client:    mgr.Client(),
		r:         r,
		opts:      opts,
		parentGVK: parentGVK,
		children:  children,
		recorder:  mgr.EventRecorder(reportingController(opts.FieldManager)),
		live:      live,
		local:     &site{client: mgr.Client(), live: live, mapper: mgr.RESTMapper(), manager: opts.FieldManager},
		schemas:   &schemas{root: openapi3.NewRoot(disc.OpenAPIV3()), builtin: sync.OnceValue(func() managedfields.TypeConverter { return applyconfigurations.NewTypeConverter(mgr.Scheme()) })},
	}
	if st, _ := mgr.RingStatus(); st.Clusters != nil {
		d.sites.spread = true
	}
	if f, ok := r.(Finalizer[T]); ok {
		d.finalize = f
	}
	return d, nil
}

// childGVK returns the kind of the child example ex: the one it sets, else
// the one scheme registers for its type.
func childGVK(scheme *runtime.Scheme, ex object.Object) (schema.GroupVersionKind, error) {
	if gvk := ex.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(ex)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("declarative: child type %T is not registered in the manager's scheme: %w", ex, err)
	}
	return gvks[0], nil
}

// childKinds gets the reader of every child kind from cache, and indexes
// the kind's objects by parent UID; examples are Options.ChildKinds, checked
// by validate. It makes no informer: the controller's sources do, either of
// the whole kind or, in a controller sharded by namespace, of each held
// bucket.
func childKinds(cache *informers.Cache, scheme *runtime.Scheme, examples []object.Object) (map[schema.GroupKind]*childKind, error) {
	out := make(map[schema.GroupKind]*childKind, len(examples))
	var errs []error
	for _, ex := range examples {
		gvk, err := childGVK(scheme, ex)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Read as the child source's informer is made (typed when the
		// scheme knows the kind, whatever ex is), so that both are one.
		read, err := client.NewObject(scheme, gvk)
		if err != nil {
			errs = append(errs, fmt.Errorf("declarative: child kind %v: %w", gvk, err))
			continue
		}
		cached, err := informers.NewKindReader(cache, read, gvk)
		if err != nil {
			errs = append(errs, fmt.Errorf("declarative: child kind %v: %w", gvk, err))
			continue
		}
		if err := indexByParent(cache, gvk.GroupKind()); err != nil {
			errs = append(errs, fmt.Errorf("declarative: child kind %v: %w", gvk, err))
			continue
		}
		out[gvk.GroupKind()] = &childKind{gvk: gvk, example: ex, read: read, cached: cached}
	}
	return out, errors.Join(errs...)
}

// indexByParent indexes the objects of kind gk by their ParentUIDLabel, in
// every informer of the kind, once for every declarative controller whose
// children are of that kind: the index is the same for all of them, as
// parent UIDs are unique.
func indexByParent(cache *informers.Cache, gk schema.GroupKind) error {
	err := cache.AddIndex(gk, ParentUIDLabel, func(obj object.Object) []string {
		if uid, ok := obj.GetLabels()[ParentUIDLabel]; ok {
			return []string{uid}
		}
		return nil
	})
	if errors.Is(err, informers.ErrIndexExists) {
		return nil
	}
	return err
}

// Sources watches every child kind: a change to a child (found by its
// labels) reconciles its parent. In the engaged clusters other than the
// manager's own, it watches the children of this controller (labelled with
// its ManagerLabel), which Child.InCluster puts there.
func (d *Declarative[T]) Sources() ([]framework.Source, error) {
	srcs := make([]framework.Source, 0, len(d.children))
	for _, ck := range d.children {
		gk := ck.gvk.GroupKind()
		src := framework.Map(func(_ context.Context, child object.Object) []reconcile.Request {
			return append(d.parentOf(child), d.conflicts.parentsOf(objectID(gk, child.GetNamespace(), child.GetName()))...)
		}, d.seeRunOnce(gk))
		// A child is in its parent's namespace whenever the controller is
		// sharded by namespace (see prepare): the member that holds the
		// parent's bucket reads the child's.
		src = framework.SameNamespace(framework.WithSelection(src, informers.Selection{Kind: ck.gvk}))
		if !ck.required {
			src = framework.WhenServed(src, d.servedKind(ck))
		}
		srcs = append(srcs, src, d.memberSource(ck))
	}
	return srcs, nil
}

// Reconcile applies the state the Reconciler declares for parent.
func (d *Declarative[T]) Reconcile(ctx context.Context, parent T) (reconcile.Result, error) {
	if parent.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, d.finalizeParent(ctx, parent)
	}
	state, err, panicked := d.desired(ctx, parent)
	if err != nil || panicked != nil {
		return reconcile.Result{}, d.desiredFailed(ctx, parent, err, panicked)
	}
	d.recordEvents(parent, state.Events)
	if state.KeepChildren {
		return d.keepChildren(ctx, parent, state)
	}
	g, declared := graphOf(state.Children) // nil: no child is a Child
	children, linked, err := d.prepare(ctx, parent, declared)
	if invalid := declarationErrors(err); invalid != nil {
		return d.invalid(ctx, parent, state, invalid)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if g == nil && slices.ContainsFunc(children, func(c child) bool { return c.absent }) { // waiting for a kind or a cluster
		g = plainGraph(len(children)) // for the Ready condition to say what they wait for
	}
	if g != nil {
		linked = g.withPolicies(children) || linked
		if children, err = g.bind(parent, children, d.dependencyNames(parent, children)); err != nil {
			return d.invalid(ctx, parent, state, err)
		}
		linked = linked || g.edges // deletion in order needs the finalizer
		for i, c := range children {
			g.vertices[i].reruns = c.reruns()
		}
	}
	d.invalids.forget(parent.GetUID()) // an error reported before is gone
	d.reportReruns(parent, children)
	if (d.finalize != nil || linked) && !slices.Contains(parent.GetFinalizers(), d.opts.Finalizer) {
		err := d.addFinalizer(ctx, parent)
		if errors.Is(err, errParentGone) {
			// Applying children now could leave some nothing cleans up;
			// a parent of the same name made meanwhile is reconciled on
			// its own.
			return reconcile.Result{}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	errs, ran := d.applyWaves(ctx, parent, g, children)
	if g != nil {
		if err := d.recordRuns(ctx, parent, children, ran); err != nil {
			errs = append(errs, err)
		}
	}
	d.conflicts.set(reconcile.Request{Namespace: parent.GetNamespace(), Name: parent.GetName()}, conflictIDs(errs))
	var held []string
	if len(errs) == 0 {
		// Prune only after every desired child is in place, so a failed
		// apply never leaves a parent with fewer children than before.
		if held, err = d.prune(ctx, parent, children); err != nil {
			errs = append(errs, err)
		}
	}
	errs, err = d.writeStatus(ctx, parent, state, g, held, errs)
	if err != nil {
		return reconcile.Result{}, err
	}
	g.rethrow()
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: state.RequeueAfter}, nil
}

// applyWaves applies children wave by wave of g (all in one wave when g is
// nil), skipping those not to apply now. It returns the errors of the
// applies and the run-once children found ready.
func (d *Declarative[T]) applyWaves(ctx context.Context, parent T, g *graph, children []child) (errs []error, ran []child) {
	for _, wave := range g.waves(len(children)) {
		todo := slices.DeleteFunc(wave, func(i int) bool {
			// Not applied while its kind is not served, or once it ran;
			// left as it is until what it is After is ready.
			return d.skip(ctx, parent, g, i, children[i]) || !g.allowed(i)
		})
		for j, err := range d.applyAll(ctx, parent, children, todo) {
			c := children[todo[j]]
			if err != nil && !errors.Is(err, errReplacing) {
				errs = append(errs, err)
				d.goneKind(parent, c.kind, err)
			}
			g.observe(ctx, todo[j], c, err)
			if c.policy.runOnce && g.vertices[todo[j]].state.ready {
				ran = append(ran, c)
			}
		}
	}
	return errs, ran
}

// writeStatus applies state.Status, with the Ready condition g and held
// sum up and the conflicts among errs, and notes the reconcile's Blocker.
// It returns errs with the status write's error added, or an error that
// ends the reconcile when the status cannot be encoded.
func (d *Declarative[T]) writeStatus(ctx context.Context, parent T, state State, g *graph, held []string, errs []error) ([]error, error) {
	// The Ready condition and the reconcile's Blocker say one thing.
	var st readyState
	if g != nil {
		st = g.summary()
	}
	if len(held) > 0 && st.status != metav1.ConditionFalse {
		st = readyState{status: metav1.ConditionFalse, reason: WaitingReason, message: held[0], since: true}
	}
	var ready metav1.Condition
	if st.status != "" {
		var blocker reconcile.Blocker
		ready, blocker = readyCondition(parent, st)
		framework.NoteBlocked(ctx, blocker)
	}
	if state.Status != nil {
		status := state.Status
		var err error
		if g != nil || len(held) > 0 {
			if status, err = withReadyCondition(status, ready); err != nil {
				return errs, errors.Join(append(errs, fmt.Errorf("encode status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err))...)
			}
		}
		if conflicts := conflictNotes(errs); len(conflicts) > 0 {
			if status, err = withConflictCondition(parent, status, d.opts.Conflict.Reason, conflicts); err != nil {
				return errs, errors.Join(append(errs, fmt.Errorf("encode status of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err))...)
			}
		}
		if err := d.applyStatus(ctx, parent, status); err != nil {
			errs = append(errs, err)
		}
	}
	return errs, nil
}

// conflictNotes returns the notes (Options.Conflict.Note) of the child
// conflicts among errs.
func conflictNotes(errs []error) []string {
	var out []string
	for _, err := range errs {
		var c *conflictError
		if errors.As(err, &c) {
			out = append(out, c.shown)
		}
	}
	return out
}

// conflictIDs returns the objectIDs of the child conflicts among errs.
func conflictIDs(errs []error) []string {
	var out []string
	for _, err := range errs {
		var c *conflictError
		if errors.As(err, &c) {
			out = append(out, c.id)
		}
	}
	return out
}
