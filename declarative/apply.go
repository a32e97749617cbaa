package declarative

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
)

// applyChild applies c unless its live copy already matches, and only over
// an object parent owns (or may adopt, see mayApply).
//
// The cache may lag behind the API server either way, so the apply carries a
// precondition that makes the server check what the cache showed: when the
// cache shows the object, its UID (the apply fails if the object was deleted
// or replaced meanwhile); when the cache shows none, a resourceVersion no
// object has, so the apply creates the object and fails if one exists. On
// such a failure the object is read from the API server and the decision
// taken again, once.
func (d *Declarative[T]) applyChild(ctx context.Context, parent T, c child) error {
	r, err := c.at.reader(c.kind)
	if err != nil {
		return err
	}
	cached, err := r.Get(ctx, types.NamespacedName{Namespace: c.obj.GetNamespace(), Name: c.obj.GetName()})
	var live metav1.Object
	switch {
	case err == nil:
		live = cached
		if err := d.mayApply(ctx, parent, c, live); err != nil {
			return err
		}
		if replacing(c, cached) {
			return errReplacing // created again once it is gone
		}
		if labelLinked(parent, c.obj, c.target) && !shows(parent, c.id(), live.GetUID()) {
			// Owned by its claim, adopted, or recorded by a write the
			// parent does not show yet (it may have failed): record it
			// until the parent shows it.
			if err := d.record(ctx, parent, recordedUID(c, live.GetUID())); err != nil {
				return err
			}
		}
		if d.unchanged(parent, cached, c) {
			return nil // nothing would change
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read %s: %w", c, err)
	default:
		// Read the kind's schema with the first apply, which waits on
		// the server anyway, rather than at the first check for drift,
		// when other changes to the child would queue up behind it. An
		// error is met again there.
		_, _ = d.schemas.forGV(c.kind.gvk.GroupVersion())
	}
	claim := ""
	if live == nil && labelLinked(parent, c.obj, c.target) {
		// Claim the child in the ledger before it exists, so that it is
		// provably the parent's even if recording its UID fails.
		if claim = d.ledger.claimOf(parent, c.id()); claim == "" {
			claim = newClaim()
			if err := d.record(ctx, parent, map[string]string{claimKey(c.id()): "?" + claim}); err != nil {
				return err
			}
		}
	}
	applied, err := d.applyOver(ctx, c, live, claim, live != nil && !d.ownsIn(c.target, parent, live))
	if stale(err, live) {
		if live, err = d.liveChild(ctx, c); err != nil {
			return err
		}
		if live != nil {
			if err := d.mayApply(ctx, parent, c, live); err != nil {
				return err
			}
		}
		applied, err = d.applyOver(ctx, c, live, claim, live != nil && !d.ownsIn(c.target, parent, live))
	}
	if err != nil && c.policy.replace && live != nil && immutable(err) {
		return d.replace(ctx, c, live, err)
	}
	if err != nil {
		return err
	}
	if live != nil && applied.GetResourceVersion() == live.GetResourceVersion() {
		// The server found nothing to change: what looked like drift
		// was its own defaulting (inside an atomic list or struct).
		logr.FromContextOrDiscard(ctx).V(1).Info("child already as declared", "child", c.String())
	} else {
		logr.FromContextOrDiscard(ctx).Info("applied child", "child", c.String())
	}
	d.appliedChildren.set(parent.GetUID(), applied.GetUID(), appliedStatus{hash: c.hash, resourceVersion: applied.GetResourceVersion()})
	if labelLinked(parent, c.obj, c.target) && !shows(parent, c.id(), applied.GetUID()) {
		// Created or adopted just now: record it.
		return d.record(ctx, parent, recordedUID(c, applied.GetUID()))
	}
	return nil
}

// applyAll applies children[i] for each i in todo, children that depend on
// none of the others, at once (at most maxApplies at a time), and returns
// their errors in todo's order. Children no owner reference can reach are
// applied one after another, in order, since each records itself in
// parent's ledger. A panic in an apply is raised again on the caller's
// goroutine, once every apply ended, so the framework recovers it as it
// does any panic of a reconcile.
func (d *Declarative[T]) applyAll(ctx context.Context, parent T, children []child, todo []int) []error {
	errs := make([]error, len(todo))
	if len(todo) == 1 {
		errs[0] = d.applyChild(ctx, parent, children[todo[0]])
		return errs
	}
	var (
		wg       sync.WaitGroup
		slots    = make(chan struct{}, maxApplies)
		mu       sync.Mutex
		panicked error
		linked   []int // positions in todo
	)
	apply := func(j int) {
		slots <- struct{}{}
		defer func() {
			<-slots
			if p := recover(); p != nil {
				mu.Lock()
				if panicked == nil {
					panicked = fmt.Errorf("declarative: apply of %s panicked: %v\n%s", children[todo[j]], p, debug.Stack())
				}
				mu.Unlock()
			}
		}()
		errs[j] = d.applyChild(ctx, parent, children[todo[j]])
	}
	for j, i := range todo {
		if labelLinked(parent, children[i].obj, children[i].target) {
			linked = append(linked, j)
			continue
		}
		wg.Go(func() { apply(j) })
	}
	if len(linked) > 0 {
		wg.Go(func() {
			for _, j := range linked {
				apply(j)
			}
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	return errs
}

// applyOver applies c, on condition that the object is live (same UID) or,
// when live is nil, that there is no object of that name (the object then
// carries claim in ClaimAnnotation, when not empty). An object being adopted
// must also be unchanged since live (its resourceVersion).
// It returns the object as applied.
func (d *Declarative[T]) applyOver(ctx context.Context, c child, live metav1.Object, claim string, adopting bool) (object.Object, error) {
	obj := c.obj.DeepCopy()
	if live == nil {
		obj.SetResourceVersion(noObjectVersion)
		if claim != "" {
			setMap(obj, "annotations", map[string]string{ClaimAnnotation: claim})
		}
	} else {
		obj.SetUID(live.GetUID())
		// In a sharded reconcile, the apply is conditional on the child as
		// read (client.WithPreconditions): a late apply from a member that
		// lost the parent's bucket fails instead of undoing the next
		// holder's. A conflict reads the child again (see stale).
		client.NoteRead(ctx, c.kind.gvk.GroupKind(), live)
		if adopting {
			// Adopted as live was: if another parent took it meanwhile
			// (its cache lagging as this one's may), the apply fails.
			obj.SetResourceVersion(live.GetResourceVersion())
		}
	}
	return c.at.client.Apply(ctx, obj, client.FieldManager(d.opts.FieldManager), client.ForceOwnership())
}

// stale reports whether err is a failed precondition of applyOver: the
// object changed identity since the cache showed it as live.
func stale(err error, live metav1.Object) bool {
	if err == nil {
		return false
	}
	if apierrors.IsConflict(err) { // an object exists after all, or the one seen is gone
		return true
	}
	if live == nil || !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" { // another object of that name: its UID is not ours to set
			return true
		}
	}
	return false
}

// unchanged reports whether applying c would leave the cached object as it
// is: it carries the hash of what was last applied, and the kind's schema
// says the apply would change nothing (see schemas.sameAfterApply). It never
// modifies cached, which is shared.
//
// A child this process applied and nobody wrote since (the cache shows the
// resourceVersion the apply returned, for the same declaration) is
// unchanged without a comparison: the server may have defaulted fields
// inside atomic lists and structs the declaration leaves out (a fieldRef's
// apiVersion, a port's protocol), which a comparison would take for drift
// on every reconcile.
func (d *Declarative[T]) unchanged(parent object.Object, cached object.Object, c child) bool {
	if cached.GetAnnotations()[AppliedAnnotation] != c.hash {
		return false
	}
	if d.appliedChildren.is(parent.GetUID(), cached.GetUID(), appliedStatus{hash: c.hash, resourceVersion: cached.GetResourceVersion()}) {
		return true
	}
	return d.schemas.sameAfterApply(cached, c.obj)
}

// childMemory remembers, per parent, what converge last applied to each
// child: the declaration's hash and the resourceVersion the apply returned.
// It is safe for concurrent use.
type childMemory struct {
	mu sync.Mutex
	// byParent maps a parent's UID to its children's UIDs and what was
	// applied to them; mu guards it. ReconcileDeleted drops a parent gone.
	// A parent has a handful of children, so a slice searched in order
	// costs less memory than a map per parent and is as quick.
	byParent map[types.UID][]appliedChild
}

// appliedChild is one entry of childMemory.
type appliedChild struct {
	uid types.UID
	appliedStatus
}

func (m *childMemory) is(parent, child types.UID, a appliedStatus) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.byParent[parent] {
		if c.uid == child {
			return c.appliedStatus == a
		}
	}
	return false
}

func (m *childMemory) set(parent, child types.UID, a appliedStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byParent == nil {
		m.byParent = map[types.UID][]appliedChild{}
	}
	cs := m.byParent[parent]
	for i := range cs {
		if cs[i].uid == child {
			cs[i].appliedStatus = a
			return
		}
	}
	m.byParent[parent] = append(cs, appliedChild{uid: child, appliedStatus: a})
}

func (m *childMemory) drop(parent, child types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.byParent[parent]
	for i := range cs {
		if cs[i].uid == child {
			last := len(cs) - 1
			cs[i], cs[last] = cs[last], appliedChild{}
			cs = cs[:last]
			break
		}
	}
	if len(cs) == 0 {
		delete(m.byParent, parent)
		return
	}
	m.byParent[parent] = cs
}

func (m *childMemory) forget(parent types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byParent, parent)
}
