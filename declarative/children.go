package declarative

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// child is one desired child, ready to apply.
type child struct {
	obj  *unstructured.Unstructured
	kind *childKind
	hash string
	// adopt is whether the child was declared with Adopt.
	adopt bool
	// absent is set when the API server does not serve the child's kind
	// (see served.go): the child waits for it, and has no hash.
	absent bool
	// policy is the child's Child.ReplaceWhenImmutable, RunOnce and Retain;
	// content is the hash of its declaration before the policies and its
	// order changed it, which a run-once child's runs are recorded under.
	policy  childPolicy
	content string
}

func (c child) String() string {
	return fmt.Sprintf("%s %s", c.obj.GetKind(), key(c.obj.GetNamespace(), c.obj.GetName()))
}

// recordedUID is the change to a parent's ledger that records c's object
// as uid and drops its claim.
func recordedUID(c child, uid types.UID) map[string]string {
	return map[string]string{c.id(): string(uid), claimKey(c.id()): ""}
}

// id names c in its parent's ledger.
func (c child) id() string {
	return objectID(c.kind.gvk.GroupKind(), c.obj.GetNamespace(), c.obj.GetName())
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// prepare turns the declared children into unstructured objects carrying
// ownership, labels and the hash of their content. linked reports children
// tied by labels only, which need the finalizer to be cleaned up. Errors
// in the declaration itself (see invalidDeclaration) are told apart from
// others, which trying again may clear.
func (d *Declarative[T]) prepare(ctx context.Context, parent object.Object, declared []any) (out []child, linked bool, err error) {
	parentNamespaced := parent.GetNamespace() != ""
	seen := map[string]bool{}
	var errs []error
	for i, decl := range declared {
		a, adopt := decl.(adoption)
		if adopt {
			decl = a.child
		}
		u, err := d.toUnstructured(decl)
		if err != nil {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %d (%T): %w", i, decl, err)))
			continue
		}
		gvk := u.GroupVersionKind()
		ck, ok := d.children[gvk.GroupKind()]
		if !ok {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s %s: kind %v is not in declarative.Options.ChildKinds; list it so converge watches and prunes it", gvk.Kind, u.GetName(), gvk.GroupKind())))
			continue
		}
		if u.GetName() == "" {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %d (%s): metadata.name is required", i, gvk.Kind)))
			continue
		}
		namespaced, err := d.namespaced(ck)
		if notServed(ck, err) {
			// Its kind is not served (its CRD not installed): it waits.
			// Namespaced or not cannot be told; most kinds are.
			if u.GetNamespace() == "" {
				u.SetNamespace(parent.GetNamespace())
			}
			if id := objectID(gvk.GroupKind(), u.GetNamespace(), u.GetName()); !seen[id] {
				seen[id] = true
				out = append(out, child{obj: u, kind: ck, absent: true})
			}
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("child %s %s: %w", gvk.Kind, u.GetName(), err))
			continue
		}
		switch {
		case namespaced && u.GetNamespace() == "":
			u.SetNamespace(parent.GetNamespace())
		case !namespaced:
			u.SetNamespace("")
		}
		if cached := ck.cached.Selection().Namespace; namespaced && cached != "" && u.GetNamespace() != cached {
			// The cache would never show it: drift would go unseen and
			// the child would be neither pruned nor finalized.
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s %s: namespace %q is outside the manager's cache, which holds namespace %q only (framework.Options.Cache.Namespace); declare it in %q or cache its namespace",
				gvk.Kind, key(u.GetNamespace(), u.GetName()), u.GetNamespace(), cached, cached)))
			continue
		}
		if _, of, sharded := sharding.BucketFrom(ctx); sharded && of.By == sharding.ByNamespace && namespaced && u.GetNamespace() != parent.GetNamespace() && ck.perNamespace(parent) {
			// Only the member holding the parent's bucket reconciles it,
			// and its controller reads the kind of its buckets'
			// namespaces only, whatever informer reads go to.
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s %s: namespace %q is not its parent's, and the controller is sharded by namespace (sharding.Options.Key): the member reconciling the parent sees only the namespaces of its buckets, so it might not see the child to revert drift or prune it; declare it in %q",
				gvk.Kind, key(u.GetNamespace(), u.GetName()), u.GetNamespace(), parent.GetNamespace())))
			continue
		}
		id := gvk.GroupKind().String() + "/" + key(u.GetNamespace(), u.GetName())
		if seen[id] {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s %s is declared twice", gvk.Kind, key(u.GetNamespace(), u.GetName()))))
			continue
		}
		seen[id] = true

		// Ownership: an owner reference where Kubernetes allows one (same
		// namespace, or a cluster-scoped parent), a label link otherwise.
		if !parentNamespaced || u.GetNamespace() == parent.GetNamespace() {
			u.SetOwnerReferences([]metav1.OwnerReference{{
				APIVersion: d.parentGVK.GroupVersion().String(), Kind: d.parentGVK.Kind,
				Name: parent.GetName(), UID: parent.GetUID(),
				Controller: new(true), BlockOwnerDeletion: new(true),
			}})
		} else {
			linked = true
		}
		setMap(u, "labels", map[string]string{ParentUIDLabel: string(parent.GetUID()), ManagerLabel: labelValue(d.opts.FieldManager)})
		setMap(u, "annotations", map[string]string{ParentAnnotation: key(parent.GetNamespace(), parent.GetName())})
		if err := inSelection(ck, u); err != nil {
			errs = append(errs, invalidDeclaration(err))
			continue
		}
		h, err := hashOf(u.Object)
		if err != nil {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s: %w", gvk.Kind, err)))
			continue
		}
		setMap(u, "annotations", map[string]string{AppliedAnnotation: h})
		out = append(out, child{obj: u, kind: ck, hash: h, adopt: adopt})
	}
	return out, linked, errors.Join(errs...)
}

// toUnstructured converts a declared child to the body of its apply: an
// unstructured child as it is, a typed one (an API object or an apply
// configuration) with the fields it sets only (see setFields), and either
// without status and server-set metadata.
func (d *Declarative[T]) toUnstructured(decl any) (*unstructured.Unstructured, error) {
	var m map[string]any
	if typednil.Is(decl) {
		if decl == nil {
			return nil, errors.New("nil child")
		}
		return nil, errors.New("nil pointer: declare a child object, or leave it out")
	}
	switch o := decl.(type) {
	case *unstructured.Unstructured:
		m = runtime.DeepCopyJSON(o.Object)
	default:
		v, err := setFields(decl)
		if err != nil {
			return nil, err
		}
		var ok bool
		if m, ok = v.(map[string]any); !ok {
			return nil, fmt.Errorf("a %T is not a JSON object", decl)
		}
		if ro, ok := decl.(runtime.Object); ok && (m["kind"] == nil || m["apiVersion"] == nil) {
			gvks, _, err := d.mgr.Scheme().ObjectKinds(ro)
			if err != nil {
				return nil, fmt.Errorf("not registered in the manager's scheme: %w", err)
			}
			m["apiVersion"], m["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
		}
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink"} {
			delete(md, f)
		}
	}
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, errors.New("apiVersion and kind are required")
	}
	return u, nil
}

// dropNulls removes null values, recursively. Empty objects stay: some carry
// meaning by their presence alone (a volume's emptyDir: {}).
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(x)
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

// inSelection checks that the cache's informer for ck, which may hold a
// selection of its kind only (framework.Options.Cache.ByKind), holds u: a
// child it did not show could not be checked for drift, pruned or found on
// finalize. Field selectors can be checked on metadata.name and
// metadata.namespace only; a child of a kind selected on other fields is
// rejected, as whether the cache holds it cannot be told before it exists.
func inSelection(ck *childKind, u *unstructured.Unstructured) error {
	sel := ck.cached.Selection()
	child := fmt.Sprintf("%s %s", u.GetKind(), key(u.GetNamespace(), u.GetName()))
	if sel.Labels != nil && !sel.Labels.Matches(labels.Set(u.GetLabels())) {
		return fmt.Errorf("child %s: its labels do not match the selector %q the manager's cache selects %s objects with (framework.Options.Cache.ByKind), so converge could not see it to revert drift or prune it; give the child labels the selector matches, or widen the selection",
			child, sel.Labels.String(), ck.gvk.Kind)
	}
	if sel.Fields == nil || sel.Fields.Empty() {
		return nil
	}
	for _, r := range sel.Fields.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return fmt.Errorf("child %s: the manager's cache selects %s objects by field %s (selector %q, framework.Options.Cache.ByKind), which converge cannot check before the child exists; select children by labels, metadata.name or metadata.namespace",
				child, ck.gvk.Kind, r.Field, sel.Fields.String())
		}
	}
	if !sel.Fields.Matches(fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}) {
		return fmt.Errorf("child %s: it does not match the field selector %q the manager's cache selects %s objects with (framework.Options.Cache.ByKind), so converge could not see it to revert drift or prune it",
			child, sel.Fields.String(), ck.gvk.Kind)
	}
	return nil
}

func setMap(u *unstructured.Unstructured, field string, add map[string]string) {
	md, _ := u.Object["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		u.Object["metadata"] = md
	}
	cur, _ := md[field].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
		md[field] = cur
	}
	for k, v := range add {
		cur[k] = v
	}
}

func hashOf(obj map[string]any) (string, error) {
	b, err := json.Marshal(obj) // encoding/json sorts map keys: stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// labelValue makes s a valid label value (63 characters, alphanumerics and -_.).
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

func (d *Declarative[T]) namespaced(ck *childKind) (bool, error) {
	m, err := d.mgr.RESTMapper().RESTMapping(ck.gvk.GroupKind(), ck.gvk.Version)
	if err != nil {
		return false, err
	}
	ck.served.Store(true) // mapped: served (see served.go)
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

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
	cached, err := c.kind.cached.Get(ctx, types.NamespacedName{Namespace: c.obj.GetNamespace(), Name: c.obj.GetName()})
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
		if labelLinked(parent, c.obj) && !shows(parent, c.id(), live.GetUID()) {
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
	if live == nil && labelLinked(parent, c.obj) {
		// Claim the child in the ledger before it exists, so that it is
		// provably the parent's even if recording its UID fails.
		if claim = d.ledger.claimOf(parent, c.id()); claim == "" {
			claim = newClaim()
			if err := d.record(ctx, parent, map[string]string{claimKey(c.id()): "?" + claim}); err != nil {
				return err
			}
		}
	}
	applied, err := d.applyOver(ctx, c, live, claim, live != nil && !d.owns(parent, live))
	if stale(err, live) {
		if live, err = d.liveChild(ctx, c); err != nil {
			return err
		}
		if live != nil {
			if err := d.mayApply(ctx, parent, c, live); err != nil {
				return err
			}
		}
		applied, err = d.applyOver(ctx, c, live, claim, live != nil && !d.owns(parent, live))
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
	if labelLinked(parent, c.obj) && !shows(parent, c.id(), applied.GetUID()) {
		// Created or adopted just now: record it.
		return d.record(ctx, parent, recordedUID(c, applied.GetUID()))
	}
	return nil
}

// maxApplies is how many children one reconcile applies at once.
const maxApplies = 8

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
		if labelLinked(parent, children[i].obj) {
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

// noObjectVersion is a resourceVersion no stored object has (etcd revisions
// count up from 1 and never reach it). An apply carrying it creates a
// missing object and fails with a conflict when the object exists.
const noObjectVersion = "18446744073709551615"

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
	return d.client.Apply(ctx, obj, client.FieldManager(d.opts.FieldManager), client.ForceOwnership())
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

// toMap converts a live object to its JSON form.
func toMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// contains reports whether live holds every value want declares (the
// status check compares both ways with it), comparing lists as follows:
//
//   - Lists of objects with a merge key (containers and volumes by name,
//     ports, volume mounts...; see mergeKeys) are associative: each declared
//     element must be contained in the live element of the same key, and
//     elements other managers added may stay.
//   - Other lists (args, command, lists of scalars, of keyless objects) are
//     atomic: the live list must have the same length and contain the
//     declared elements in the same order. An element added, dropped or
//     moved by hand is drift, and is reverted.
//
// When in doubt it answers false.
func contains(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok || !contains(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return false
		}
		if !associative(w) {
			if len(l) != len(w) {
				return false
			}
			for i := range w {
				if !contains(l[i], w[i]) {
					return false
				}
			}
			return true
		}
		if len(l) < len(w) {
			return false
		}
		for _, wv := range w {
			found := false
			for _, lv := range l {
				if contains(lv, wv) { // wv's key fields are compared too
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		return equalScalar(live, want)
	}
}

// mergeKeys are the fields that key the associative lists of Kubernetes
// objects (x-kubernetes-list-map-keys): containers, env, volumes and most
// others by name, ports, volume mounts and devices by path, conditions by
// type, owner references by uid.
var mergeKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "type", "ip", "uid"}

// associative reports whether the declared list w looks like an associative
// list: all its elements are objects that share a merge key holding a scalar,
// with no two elements alike on it.
func associative(w []any) bool {
	if len(w) == 0 {
		return false
	}
	for _, k := range mergeKeys {
		seen := map[any]bool{}
		ok := true
		for _, e := range w {
			m, isMap := e.(map[string]any)
			if !isMap {
				return false
			}
			v, has := m[k]
			if !has {
				ok = false
				break
			}
			switch v.(type) {
			case string, float64, int64, bool:
			default:
				ok = false
			}
			if !ok || seen[v] {
				ok = false
				break
			}
			seen[v] = true
		}
		if ok {
			return true
		}
	}
	return false
}

// equalScalar compares JSON scalars; numbers may be int64 on one side (the
// converter) and float64 on the other (encoding/json).
func equalScalar(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum && bNum {
		return fa == fb
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// perNamespace reports whether the children of this kind are read from
// the buckets of a ring sharded by namespace, for parent, a namespaced
// object: the cache then holds, of parent's children, those in parent's
// namespace only.
func (ck *childKind) perNamespace(parent object.Object) bool {
	b, ok := ck.cached.Routed()
	return ok && b.By == sharding.ByNamespace && parent.GetNamespace() != ""
}

// prune deletes the children parent owns (see owns) that are not desired,
// and drops the label-linked ones it deleted from the parent's ledger. A
// labelled object that parent does not provably own is left alone. held
// says, of each child left for a later reconcile because another child is
// After it, why ("ConfigMap config is deleted once Job migrate, which is
// After it, is gone").
func (d *Declarative[T]) prune(ctx context.Context, parent object.Object, desired []child) (held []string, err error) {
	keep := make(map[string]bool, len(desired))
	for _, c := range desired {
		keep[c.id()] = true
	}
	var errs []error
	deleted := map[string]string{}        // ledger entries to drop
	holder := d.heldChildren(ctx, parent) // see Child.After
	var holds []pruneHold
	for _, ck := range d.sortedKinds() {
		found, err := d.labelled(ctx, ck, parent)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, obj := range found {
			id := objectID(ck.gvk.GroupKind(), obj.GetNamespace(), obj.GetName())
			if keep[id] || !d.owns(parent, obj) {
				continue
			}
			if retained(obj) {
				// Released, not deleted: whatever is After it may stay.
				if err := d.release(ctx, ck, parent, obj); err != nil {
					errs = append(errs, err)
					continue
				}
				d.appliedChildren.drop(parent.GetUID(), obj.GetUID())
				deleted[id], deleted[claimKey(id)] = "", ""
				continue
			}
			if by, err := holder(ck, obj); by != "" || err != nil {
				if by != "" {
					holds = append(holds, pruneHold{child: displayID(parent, id), by: by})
					logr.FromContextOrDiscard(ctx).V(1).Info("child left for a later prune", "child", displayID(parent, id), "after", by)
				}
				errs = append(errs, err)
				continue
			}
			if err := d.deleteChild(ctx, ck, obj); err != nil {
				errs = append(errs, err)
				continue
			}
			d.appliedChildren.drop(parent.GetUID(), obj.GetUID())
			if labelLinked(parent, obj) {
				deleted[id], deleted[claimKey(id)] = "", ""
			}
		}
	}
	if len(deleted) > 0 {
		errs = append(errs, d.record(ctx, parent, deleted))
	}
	// First the children held by one that is not held itself: what the
	// prune waits for now.
	slices.SortStableFunc(holds, func(a, b pruneHold) int {
		aHeld := slices.ContainsFunc(holds, func(h pruneHold) bool { return h.child == a.by })
		bHeld := slices.ContainsFunc(holds, func(h pruneHold) bool { return h.child == b.by })
		switch {
		case aHeld == bHeld:
			return 0
		case bHeld:
			return -1
		}
		return 1
	})
	for _, h := range holds {
		held = append(held, fmt.Sprintf("%s is deleted once %s, which is After it, is gone", h.child, h.by))
	}
	return held, errors.Join(errs...)
}

// pruneHold is a child left for a later prune, and the child After it
// that is still there.
type pruneHold struct{ child, by string }

// labelled returns the cached children of kind ck that carry parent's labels.
// It reads the kind's index by ParentUIDLabel (see indexByParent), so its cost
// is that of parent's children, not of every cached object of the kind.
//
// A kind read per bucket by namespace is listed in the parent's namespace
// only, where its children are (see prepare): should the parent's bucket
// no longer be held here, the list fails rather than finding no children.
func (d *Declarative[T]) labelled(ctx context.Context, ck *childKind, parent object.Object) ([]object.Object, error) {
	if !ck.isServed() {
		return nil, nil // a kind not served has no objects (see served.go)
	}
	sel := labels.SelectorFromSet(labels.Set{ManagerLabel: labelValue(d.opts.FieldManager)})
	opts := []informers.ListOption{informers.MatchingIndex(ParentUIDLabel, string(parent.GetUID())), informers.MatchingLabels(sel)}
	if ck.perNamespace(parent) {
		opts = append(opts, informers.InNamespace(parent.GetNamespace()))
	}
	objs, err := ck.cached.List(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("list %s children: %w", ck.gvk.Kind, err)
	}
	return objs, nil
}

// deleteChild deletes obj, a child of kind ck, on condition that it is
// still the object read (its UID) and, in a sharded reconcile, unchanged
// since (client.WithPreconditions). A conflict is not an error: the object
// was replaced (not this parent's to delete), or it changed, and its
// change reconciles the parent again.
func (d *Declarative[T]) deleteChild(ctx context.Context, ck *childKind, obj object.Object) error {
	client.NoteRead(ctx, ck.gvk.GroupKind(), obj)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ck.gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	err := d.client.Delete(ctx, u, client.MatchingUID(obj.GetUID()), client.Propagation(metav1.DeletePropagationBackground))
	switch {
	case err == nil:
		logr.FromContextOrDiscard(ctx).Info("deleted child", "child", ck.gvk.Kind+" "+key(obj.GetNamespace(), obj.GetName()))
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		return err
	}
	return nil
}

// sortedKinds returns the child kinds ordered by kind, so that pruning visits
// them in the same order on every reconcile.
func (d *Declarative[T]) sortedKinds() []*childKind {
	return slices.SortedFunc(maps.Values(d.children), func(a, b *childKind) int {
		return cmp.Compare(a.gvk.String(), b.gvk.String())
	})
}

// parentOf maps a child to its parent through the labels converge set.
func (d *Declarative[T]) parentOf(child object.Object) []reconcile.Request {
	if child.GetLabels()[ManagerLabel] != labelValue(d.opts.FieldManager) {
		return nil
	}
	ref := child.GetAnnotations()[ParentAnnotation]
	if ref == "" {
		return nil
	}
	return []reconcile.Request{parentRequest(ref)}
}

// parentRequest is the parent a ParentAnnotation value names.
func parentRequest(ref string) reconcile.Request {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return reconcile.Request{Name: ref}
	}
	return reconcile.Request{Namespace: ns, Name: name}
}

// objectRef returns an unstructured stub naming parent, for writes.
func (d *Declarative[T]) objectRef(parent object.Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(d.parentGVK)
	u.SetNamespace(parent.GetNamespace())
	u.SetName(parent.GetName())
	return u
}
