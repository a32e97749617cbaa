package declarative

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// ErrChildConflict is wrapped by the error of a reconcile that found a
// declared child already existing without belonging to the parent: controlled
// by another owner, or made by someone else. The object is left untouched.
var ErrChildConflict = errors.New("child exists and is not managed by this parent")

// ChildConflictReason is only the default of Options.Conflict.Reason: the
// reason of the Warning Event converge records on a parent whose declared
// child is someone else's object, and of the ChildConflictCondition
// condition. It holds the same string as ChildConflictCondition, but the two
// are separate constants because only the reason may be changed: a
// controller that sets Options.Conflict.Reason changes this, never the
// condition type.
const ChildConflictReason = "ChildConflict"

// ChildConflictCondition is the type of the condition converge adds to the
// parent's status conditions (when State.Status holds a non-empty
// "conditions" list, as one built with Conditions does) while a declared
// child is someone else's object: status True, reason Options.Conflict.Reason,
// the message naming the objects as the Events' notes do. It is left out, and
// so removed, once there is no conflict.
//
// The condition type is fixed, whatever Options.Conflict.Reason says, so
// that tools can wait on it (kubectl wait --for=condition=ChildConflict);
// its reason names the cause, which a controller may word its own way. It
// holds the same string as ChildConflictReason only because that is the
// reason's default.
const ChildConflictCondition = "ChildConflict"

// Conflict describes a declared child whose object is someone else's, for
// ConflictOptions.Note.
type Conflict struct {
	// Parent names the parent that declared the child: its apiVersion,
	// kind, namespace and name.
	Parent object.Object
	// Kind is the child's kind.
	Kind schema.GroupVersionKind
	// Object is the existing object, as converge read it (its metadata at
	// least).
	Object metav1.Object
	// Cause says why the object is not the parent's, and what would make it
	// so if anything does: "it is controlled by StaticSite other (uid ...)".
	Cause string
}

// defaultConflictNote is the note of a Conflict when ConflictOptions.Note is
// nil, and the message of the reconcile's error.
func defaultConflictNote(c Conflict) string {
	return fmt.Sprintf("%s %s already exists and is not managed by %s %s: %s", c.Kind.Kind, key(c.Object.GetNamespace(), c.Object.GetName()),
		c.Parent.GetObjectKind().GroupVersionKind().Kind, key(c.Parent.GetNamespace(), c.Parent.GetName()), c.Cause)
}

// conflictError is the error of one declared child whose object is someone
// else's; it wraps ErrChildConflict.
type conflictError struct {
	// note is defaultConflictNote's, for the error; shown is
	// Options.Conflict.Note's, for the Event and the condition.
	note, shown string
	// id names the object (see objectID), so that a change to it
	// reconciles the parent again (see conflictWatch).
	id string
}

func (e *conflictError) Error() string { return ErrChildConflict.Error() + ": " + e.note }
func (e *conflictError) Unwrap() error { return ErrChildConflict }

// adoption wraps a declared child that may be adopted. See Adopt.
type adoption struct{ child any }

// Adopt marks a child of State.Children that converge may take over when an
// object of that name already exists with no controller owner reference (made
// by hand, or by a tool that sets none): it then applies the child over it,
// forcing the fields it declares and setting its owner reference (or labels),
// and from then on manages and prunes it like a child it created. An object
// controlled by another owner, or whose ParentUIDLabel names another parent
// that exists, is never taken, even with Adopt. child is an object or a
// Child, which Adopt wraps whole: to take back a child a deleted parent of
// the same name released (Child.Retain), declare it
// Adopt(NewChild(obj).Retain()).
//
//	state.Children = append(state.Children, declarative.Adopt(configMap))
func Adopt(child any) any { return adoption{child: child} }

// ownerOf returns obj's controller owner reference, or nil.
func ownerOf(obj metav1.Object) *metav1.OwnerReference {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return &ref
		}
	}
	return nil
}

// labelLinked reports whether child is tied to parent by labels rather
// than an owner reference: because an owner reference cannot reach it (a
// namespaced parent's child in another namespace or cluster-scoped), or
// because it is retained (RetainAnnotation, see Child.Retain), which the
// garbage collector must never take for the parent's, or because it is in
// cluster, another cluster than the parent's (see Child.InCluster).
func labelLinked(parent, child metav1.Object, cluster string) bool {
	return cluster != "" || parent.GetNamespace() != "" && child.GetNamespace() != parent.GetNamespace() ||
		child.GetAnnotations()[RetainAnnotation] == "true"
}

// owns reports whether obj is proven to be parent's child: its controller
// owner reference names parent's UID or, for children owner references cannot
// reach, it has no controller, its ParentUIDLabel names parent, and parent's
// ledger (LedgerAnnotation) records its UID or the claim it was created
// with. Labels alone never prove ownership, nor does a ledger alone: a
// ledger lists what converge wrote, the label that it is still the
// parent's.
func (d *Declarative[T]) owns(parent, obj metav1.Object) bool { return d.ownsIn("", parent, obj) }

// ownsIn is owns for obj read in cluster ("" for the parent's): an owner
// reference in another cluster proves nothing, and such an object is
// never the parent's.
func (d *Declarative[T]) ownsIn(cluster string, parent, obj metav1.Object) bool {
	if ref := ownerOf(obj); ref != nil {
		return cluster == "" && ref.UID == parent.GetUID()
	}
	return labelLinked(parent, obj, cluster) &&
		obj.GetLabels()[ParentUIDLabel] == string(parent.GetUID()) && d.ledger.holds(parent, cluster, obj)
}

// otherLink returns the parent UID obj's labels link it to when that is not
// parent's (the child of another parent, of this controller or another),
// else "".
func otherLink(parent, obj metav1.Object) string {
	if uid := obj.GetLabels()[ParentUIDLabel]; uid != "" && uid != string(parent.GetUID()) {
		return uid
	}
	return ""
}

// mayApply decides whether c may be applied over live, an existing object
// of its name: yes when parent owns it, or when c may be adopted, no other
// owner controls live and its labels link it to no other parent that
// exists. Otherwise
// it records a Warning Event on parent and returns an error wrapping
// ErrChildConflict.
func (d *Declarative[T]) mayApply(ctx context.Context, parent T, c child, live metav1.Object) error {
	if d.ownsIn(c.target, parent, live) {
		return nil
	}
	ref := ownerOf(live)
	other := otherLink(parent, live)
	if ref == nil && c.adopt && (other == "" || d.deadLink(ctx, live, other)) {
		return nil
	}
	if prev, ok := d.previousParent(parent, live, ref, c.target); ok {
		// Someone deleted the parent and made it again: its old children
		// are on their way out, and their deletion reconciles the new
		// parent (they carry its annotation). Not a conflict.
		return fmt.Errorf("%s %s still belongs to %s, a deleted %s of the same name as %s %s: waiting for it to be deleted",
			c.kind.gvk.Kind, key(live.GetNamespace(), live.GetName()), prev, d.parentGVK.Kind, d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()))
	}
	var why string
	switch {
	case ref != nil:
		why = fmt.Sprintf("it is controlled by %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	case other != "":
		why = fmt.Sprintf("its label %s links it to another parent (uid %s), which exists; declarative.Adopt never takes another parent's child", ParentUIDLabel, other)
	case live.GetLabels()[ParentUIDLabel] != "":
		why = fmt.Sprintf("it carries the labels of %s %s, but converge did not create it (annotation %s on the parent does not list its uid %s); declare it with declarative.Adopt to take it over",
			d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), LedgerAnnotation, live.GetUID())
	case labelLinked(parent, live, c.target) && d.ledger.holds(parent, c.target, live):
		why = fmt.Sprintf("annotation %s on %s %s lists it, but its label %s no longer names the parent (removed by hand?): set the label to %s to hand it back",
			LedgerAnnotation, d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), ParentUIDLabel, parent.GetUID())
	default:
		why = fmt.Sprintf("it was not created by %s %s; declare it with declarative.Adopt to take it over", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()))
	}
	conflict := Conflict{Parent: d.objectRef(parent), Kind: c.kind.gvk, Object: live, Cause: why}
	note, shown := defaultConflictNote(conflict), d.opts.Conflict.Note(conflict)
	if d.recorder != nil {
		d.recorder.Eventf(parent, nil, "Warning", d.opts.Conflict.Reason, "Apply", "%s", truncate(shown, 1024)) // an Event's note limit
	}
	return &conflictError{note: note, shown: shown, id: objectIn(c.kind.gvk.GroupKind(), c.target, live.GetNamespace(), live.GetName())}
}

// previousParent reports whether live, which parent does not own, is the
// child of a previous parent of the same kind, namespace and name (deleted:
// a name holds one object at a time) that the garbage collector or that
// parent's finalizer is deleting, and describes that parent. ref is live's
// controller owner reference, or nil.
func (d *Declarative[T]) previousParent(parent T, live metav1.Object, ref *metav1.OwnerReference, cluster string) (string, bool) {
	if ref != nil && cluster == "" {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		sameScope := parent.GetNamespace() == "" || live.GetNamespace() == parent.GetNamespace() // where the reference points
		if err != nil || gv.Group != d.parentGVK.Group || ref.Kind != d.parentGVK.Kind || ref.Name != parent.GetName() || !sameScope || ref.UID == parent.GetUID() {
			return "", false
		}
		return fmt.Sprintf("uid %s", ref.UID), true
	}
	l := live.GetLabels()
	if ref != nil || live.GetDeletionTimestamp() == nil || !labelLinked(parent, live, cluster) ||
		l[ManagerLabel] != labelValue(d.opts.FieldManager) || l[ParentUIDLabel] == "" || l[ParentUIDLabel] == string(parent.GetUID()) ||
		live.GetAnnotations()[ParentAnnotation] != key(parent.GetNamespace(), parent.GetName()) {
		return "", false
	}
	return fmt.Sprintf("uid %s", l[ParentUIDLabel]), true
}

// objectID names an object of kind gk across kinds and namespaces.
func objectID(gk schema.GroupKind, namespace, name string) string {
	return gk.String() + "/" + key(namespace, name)
}

// conflictWatch remembers, for each parent whose last reconcile found
// conflicts, the objects it conflicts with: a change to one of them (its
// deletion, say) reconciles the parent at once, where nothing else would
// until the retry backoff, up to many minutes, ran out. Those objects carry
// no label leading to the parent.
//
// It is safe for concurrent use. It holds an entry per parent in conflict
// now: an entry is replaced by each reconcile that applies children and
// removed when the parent is deleted.
type conflictWatch struct {
	mu sync.Mutex
	// byParent maps a parent to the objectIDs of its conflicts; mu guards it.
	byParent map[reconcile.Request][]string
}

// set records ids as the conflicts of parent, replacing the ones before.
func (w *conflictWatch) set(parent reconcile.Request, ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(ids) == 0 {
		delete(w.byParent, parent)
		return
	}
	if w.byParent == nil {
		w.byParent = map[reconcile.Request][]string{}
	}
	w.byParent[parent] = ids
}

// parentsOf returns the parents in conflict with the object named id.
func (w *conflictWatch) parentsOf(id string) []reconcile.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []reconcile.Request
	for parent, ids := range w.byParent {
		if slices.Contains(ids, id) {
			out = append(out, parent)
		}
	}
	return out
}

// withConflictCondition returns status with a ChildConflictCondition
// condition of reason reason describing conflicts added to its conditions list, keeping the
// lastTransitionTime the parent's current one has. A status without a
// non-empty "conditions" list is returned as it is: converge cannot tell
// whether its type has room for conditions.
func withConflictCondition(parent object.Object, status any, reason string, conflicts []string) (any, error) {
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return status, nil // not an object: no conditions to add to
	}
	conds, ok := m["conditions"].([]any)
	if !ok || len(conds) == 0 {
		return status, nil
	}
	msg := truncate(strings.Join(conflicts, "; "), 32768) // metav1.Condition's limit
	cond := map[string]any{
		"type": ChildConflictCondition, "status": string(metav1.ConditionTrue), "reason": reason,
		"message": msg, "observedGeneration": parent.GetGeneration(),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	if live, err := toMap(parent); err == nil {
		cur, _, _ := unstructured.NestedSlice(live, "status", "conditions")
		for _, c := range cur {
			if cm, ok := c.(map[string]any); ok && cm["type"] == ChildConflictCondition && cm["status"] == string(metav1.ConditionTrue) && cm["lastTransitionTime"] != nil {
				cond["lastTransitionTime"] = cm["lastTransitionTime"]
			}
		}
	}
	out := make([]any, 0, len(conds)+1)
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok && cm["type"] == ChildConflictCondition {
			continue
		}
		out = append(out, c)
	}
	m["conditions"] = append(out, cond)
	return m, nil
}

// liveChildren lists, from the API server rather than the cache, the objects
// of kind ck that carry parent's labels and that parent owns. Finalizing
// needs it: the cache may not show a child applied a moment ago yet, and a
// child missed then would outlive its parent.
//
// A kind the API server does not serve (its CRD was removed) has no objects:
// it yields none rather than an error, which would keep the parent
// Terminating for good.
func (d *Declarative[T]) liveChildren(ctx context.Context, at *site, ck *childKind, parent T) ([]object.Object, error) {
	what := fmt.Sprintf("list %s children of %s %s", ck.gvk.Kind, d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()))
	if at.remote() {
		what += " in cluster " + at.name
	}
	m, err := at.mapper.RESTMapping(ck.gvk.GroupKind(), ck.gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var res metadata.ResourceInterface = at.live.Resource(m.Resource)
	if !at.remote() {
		namespaced, err := d.namespaced(ck)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if ns := ck.cached.Selection().Namespace; ns != "" && namespaced {
			// The cache holds this namespace only, and children are only
			// applied there (see prepare); RBAC may allow no wider list.
			res = at.live.Resource(m.Resource).Namespace(ns)
		}
	} else if ns := at.cl.Target().Namespace; ns != "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
		res = at.live.Resource(m.Resource).Namespace(ns)
	}
	sel := labels.SelectorFromSet(labels.Set{ParentUIDLabel: string(parent.GetUID()), ManagerLabel: labelValue(d.opts.FieldManager)})
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if apierrors.IsNotFound(err) {
		return nil, nil // a list finds no resource: the kind is not served (the mapper has not noticed yet)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]object.Object, 0, len(list.Items))
	for i := range list.Items {
		if d.ownsIn(at.name, parent, &list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// liveChild reads c's object from the API server of its cluster; nil when
// there is none.
func (d *Declarative[T]) liveChild(ctx context.Context, c child) (metav1.Object, error) {
	obj, err := readMetaIn(ctx, c.at, c.kind.gvk, c.obj.GetNamespace(), c.obj.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", c, err)
	}
	return obj, nil
}

// readMeta reads the metadata of the object of kind gvk namespace/name
// from the API server.
func (d *Declarative[T]) readMeta(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error) {
	return readMetaIn(ctx, d.local, gvk, namespace, name)
}

// readMetaIn is readMeta from the API server of the cluster at.
func readMetaIn(ctx context.Context, at *site, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error) {
	m, err := at.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var res metadata.ResourceInterface = at.live.Resource(m.Resource)
	if namespace != "" {
		res = at.live.Resource(m.Resource).Namespace(namespace)
	}
	return res.Get(ctx, name, metav1.GetOptions{})
}

// truncate shortens s to at most n bytes, ending with "..." when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

// deadLink reports whether the parent of UID other that live's labels link
// it to is gone: no parent of live's ParentAnnotation exists, or one of
// another UID (the children outlived their parent: orphaned on deletion,
// restored from a backup). A link another controller made (another
// ManagerLabel), one without that annotation, or one whose parent cannot be
// read counts as alive.
func (d *Declarative[T]) deadLink(ctx context.Context, live metav1.Object, other string) bool {
	at, ok := live.GetAnnotations()[ParentAnnotation]
	if !ok || at == "" || live.GetLabels()[ManagerLabel] != labelValue(d.opts.FieldManager) {
		return false // not a link this controller made: its parent may be of another kind
	}
	r := parentRequest(at)
	p, err := d.readMeta(ctx, d.parentGVK, r.Namespace, r.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	}
	return string(p.GetUID()) != other
}
