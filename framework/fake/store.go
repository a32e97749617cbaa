package fake

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-dev/converge/object"
)

// event is one change, as watches see it. Its objects are never modified.
type event struct {
	rv   int64
	kind *kind
	typ  watch.EventType
	obj  object.Object
	// prev is the object before a modification (nil otherwise): a filtered
	// watch sees an object leave or enter its selection.
	prev object.Object
	// writer is the identity of the client whose request made the change
	// (see Server.ConfigAs).
	writer string
}

// ref locates a stored object.
type ref struct {
	kind *kind
	key  types.NamespacedName
}

// getLocked returns the stored object (shared: do not modify) or NotFound.
func (s *Server) getLocked(k *kind, ns, name string) (object.Object, error) {
	if obj, ok := s.objects[k][types.NamespacedName{Namespace: ns, Name: name}]; ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(k.gvr.GroupResource(), name)
}

// newObject returns an empty object of k with its apiVersion and kind set.
func (s *Server) newObject(k *kind) (object.Object, error) {
	o, err := s.scheme.New(k.gvk)
	if err != nil {
		return nil, fmt.Errorf("fake: new %s: %w", k.gvk, err)
	}
	obj, ok := o.(object.Object)
	if !ok {
		return nil, fmt.Errorf("fake: %T has no object metadata", o)
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	return obj, nil
}

// truncateTimes rounds the times of obj's managedFields down to the
// second, as they would be once serialized: a write that changes nothing
// else then compares equal to the stored object.
func truncateTimes(obj object.Object) {
	mf := obj.GetManagedFields()
	for i := range mf {
		if mf[i].Time != nil {
			t := mf[i].Time.Rfc3339Copy()
			mf[i].Time = &t
		}
	}
}

// commitLocked stores obj (owned by the store from now on) as the next
// resourceVersion and records the event.
func (s *Server) commitLocked(k *kind, typ watch.EventType, obj, prev object.Object) object.Object {
	truncateTimes(obj)
	s.rv++
	obj.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if typ == watch.Deleted {
		delete(s.objects[k], key)
		delete(s.uids, obj.GetUID())
	} else {
		if s.objects[k] == nil {
			s.objects[k] = map[types.NamespacedName]object.Object{}
		}
		s.objects[k][key] = obj
		s.uids[obj.GetUID()] = ref{kind: k, key: key}
	}
	s.history = append(s.history, event{rv: s.rv, kind: k, typ: typ, obj: obj, prev: prev, writer: s.writer})
	close(s.changed)
	s.changed = make(chan struct{})
	return obj
}

// createLocked stores obj, new, in namespace ns. managed says that obj's
// managedFields are already computed (an apply); otherwise the write is
// recorded under manager. seeded keeps the status (Options.Objects).
func (s *Server) createLocked(k *kind, ns string, obj object.Object, manager string, managed, seeded bool) (object.Object, error) {
	obj = obj.DeepCopyObject().(object.Object)
	if err := s.placeLocked(k, ns, obj); err != nil {
		return nil, err
	}
	if _, err := s.getLocked(k, obj.GetNamespace(), obj.GetName()); err == nil {
		return nil, apierrors.NewAlreadyExists(k.gvr.GroupResource(), obj.GetName())
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(s.now()))
	obj.SetGeneration(0)
	if k.generation {
		obj.SetGeneration(1)
	}
	obj.SetResourceVersion("")
	switch {
	case seeded && obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0:
		return nil, invalid(k, obj.GetName(), field.Forbidden(field.NewPath("metadata", "deletionTimestamp"),
			"an object being deleted without finalizers would be gone at once: give it a finalizer, or no deletionTimestamp"))
	case seeded && obj.GetDeletionTimestamp() != nil:
		// A seeded object may be terminating already.
	default:
		obj.SetDeletionTimestamp(nil)
		obj.SetDeletionGracePeriodSeconds(nil)
	}
	if k.status && !seeded {
		if err := copyStatus(obj, nil); err != nil {
			return nil, err
		}
	}
	if !managed {
		empty, err := s.newObject(k)
		if err != nil {
			return nil, err
		}
		out, err := s.recordUpdate(k, "", empty, obj, manager)
		if err != nil {
			return nil, err
		}
		obj = out
	}
	out := s.commitLocked(k, watch.Added, obj, nil)
	if !seeded {
		s.collectDanglingLocked(k, out)
	}
	return out, nil
}

// placeLocked checks obj's name and namespace (from the request's ns) and
// gives a generateName object its name.
func (s *Server) placeLocked(k *kind, ns string, obj object.Object) error {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		for {
			name := obj.GetGenerateName() + randomSuffix()
			if _, err := s.getLocked(k, ns, name); err != nil {
				obj.SetName(name)
				break
			}
		}
	}
	if obj.GetName() == "" {
		return invalid(k, "", field.Required(field.NewPath("metadata", "name"), "name or generateName is required"))
	}
	if !k.namespaced {
		obj.SetNamespace("")
		return nil
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(ns)
	}
	if ns == "" {
		return invalid(k, obj.GetName(), field.Required(field.NewPath("metadata", "namespace"), ""))
	}
	if obj.GetNamespace() != ns {
		return apierrors.NewBadRequest(fmt.Sprintf("%s %q: the namespace of the provided object (%q) does not match the namespace sent on the request (%q)", k, obj.GetName(), obj.GetNamespace(), ns))
	}
	return nil
}

// updateLocked replaces the object named by the request (ns, name,
// subresource sub) with obj. managed says that obj's managedFields are
// already computed (an apply); otherwise the write is recorded under
// manager.
func (s *Server) updateLocked(k *kind, ns, name, sub string, obj object.Object, manager string, managed bool) (object.Object, error) {
	old, err := s.getLocked(k, ns, name)
	if err != nil {
		return nil, err
	}
	if obj.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: the name of the object (%q) does not match the name on the URL (%q)", k, obj.GetName(), name))
	}
	if k.namespaced && obj.GetNamespace() != "" && obj.GetNamespace() != ns {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %q: the namespace of the provided object (%q) does not match the namespace sent on the request (%q)", k, name, obj.GetNamespace(), ns))
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return nil, conflict(k, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again (resourceVersion %s, latest %s)", rv, old.GetResourceVersion()))
	}
	if uid := obj.GetUID(); uid != "" && uid != old.GetUID() {
		return nil, uidConflict(k, name, uid, old.GetUID())
	}
	var next object.Object
	if sub == "status" {
		// A status write changes the status only.
		next = old.DeepCopyObject().(object.Object)
		if err := copyStatus(next, obj); err != nil {
			return nil, err
		}
		next.SetManagedFields(obj.GetManagedFields())
	} else {
		next = obj.DeepCopyObject().(object.Object)
		if k.status {
			if err := copyStatus(next, old); err != nil {
				return nil, err
			}
		}
	}
	if old.GetDeletionTimestamp() != nil {
		for _, f := range next.GetFinalizers() {
			if !slices.Contains(old.GetFinalizers(), f) {
				return nil, invalid(k, name, field.Forbidden(field.NewPath("metadata", "finalizers"),
					fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %q", f)))
			}
		}
	}
	next.SetNamespace(old.GetNamespace())
	next.SetUID(old.GetUID())
	next.SetCreationTimestamp(old.GetCreationTimestamp())
	next.SetDeletionTimestamp(old.GetDeletionTimestamp())
	next.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	next.SetResourceVersion(old.GetResourceVersion())
	next.SetGeneration(old.GetGeneration())
	if !managed {
		if next, err = s.recordUpdate(k, sub, old, next, manager); err != nil {
			return nil, err
		}
	}
	changedSpec, err := specChanged(old, next, k.status)
	if err != nil {
		return nil, fmt.Errorf("fake: update %s %s/%s: %w", k, ns, name, err)
	}
	if k.labelsGeneration && !maps.Equal(old.GetLabels(), next.GetLabels()) {
		changedSpec = true
	}
	if changedSpec && k.generation {
		next.SetGeneration(old.GetGeneration() + 1)
	}
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		// The last finalizer is gone: the object goes with it.
		return s.removeLocked(k, next), nil
	}
	next.GetObjectKind().SetGroupVersionKind(k.gvk)
	truncateTimes(next)
	if apiequality.Semantic.DeepEqual(old, next) {
		return old, nil // a write that changes nothing keeps the resourceVersion
	}
	out := s.commitLocked(k, watch.Modified, next, old)
	s.collectDanglingLocked(k, out)
	return out, nil
}

// removeLocked deletes obj (the object's final state) and collects the
// garbage it leaves.
func (s *Server) removeLocked(k *kind, obj object.Object) object.Object {
	gone := s.commitLocked(k, watch.Deleted, obj, nil)
	s.collectLocked(gone.GetUID())
	return gone
}

// deleteLocked deletes the object named ns/name: at once, or, when it has
// finalizers, by setting its deletionTimestamp.
func (s *Server) deleteLocked(k *kind, ns, name string, opts *metav1.DeleteOptions) (object.Object, error) {
	old, err := s.getLocked(k, ns, name)
	if err != nil {
		return nil, err
	}
	if p := opts.Preconditions; p != nil {
		// kube-apiserver checks a deletion's preconditions before its
		// storage does, naming the kind where others name the resource.
		byKind := schema.GroupResource{Group: k.gvk.Group, Resource: k.gvk.Kind}
		if p.UID != nil && *p.UID != old.GetUID() {
			return nil, apierrors.NewConflict(byKind, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, old.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != old.GetResourceVersion() {
			return nil, apierrors.NewConflict(byKind, name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, old.GetResourceVersion()))
		}
	}
	policy := metav1.DeletePropagationBackground
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	} else if opts.OrphanDependents != nil && *opts.OrphanDependents {
		policy = metav1.DeletePropagationOrphan
	}
	switch policy {
	case metav1.DeletePropagationOrphan:
		s.orphanLocked(old.GetUID())
	case metav1.DeletePropagationForeground:
		s.collectDependentsLocked(old.GetUID())
	}
	if len(old.GetFinalizers()) > 0 {
		if old.GetDeletionTimestamp() != nil {
			return old, nil
		}
		next := old.DeepCopyObject().(object.Object)
		now := metav1.NewTime(s.now())
		var zero int64
		next.SetDeletionTimestamp(&now)
		next.SetDeletionGracePeriodSeconds(&zero)
		if g := next.GetGeneration(); g > 0 {
			next.SetGeneration(g + 1) // as the API server marks a deletion
		}
		return s.commitLocked(k, watch.Modified, next, old), nil
	}
	return s.removeLocked(k, old.DeepCopyObject().(object.Object)), nil
}

// dependentsLocked returns the objects with an owner reference to uid.
func (s *Server) dependentsLocked(uid types.UID) []ref {
	var out []ref
	for k, objs := range s.objects {
		for key, obj := range objs {
			for _, o := range obj.GetOwnerReferences() {
				if o.UID == uid {
					out = append(out, ref{kind: k, key: key})
					break
				}
			}
		}
	}
	return out
}

// collectLocked is the garbage collector, run when the object uid is gone:
// each dependent that has no other owner left is deleted (in the
// background: its own dependents follow); a dependent with another owner
// that exists loses its reference to uid.
func (s *Server) collectLocked(uid types.UID) {
	for _, r := range s.dependentsLocked(uid) {
		if obj, ok := s.objects[r.kind][r.key]; ok { // else collected meanwhile
			s.dropGoneOwnersLocked(r, obj)
		}
	}
}

// collectDanglingLocked is the garbage collector for obj, just written,
// as kube's collects it shortly after the write: when an owner it refers
// to is gone (no object has its UID), obj is deleted if no owner is left,
// or loses the dangling references. The writer's answer is obj as
// written.
func (s *Server) collectDanglingLocked(k *kind, obj object.Object) {
	s.dropGoneOwnersLocked(ref{kind: k, key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}, obj)
}

// dropGoneOwnersLocked deletes obj, stored at r, when none of its owners
// exists any more, or removes its references to the owners that are gone;
// an object whose owners all exist is left as it is.
func (s *Server) dropGoneOwnersLocked(r ref, obj object.Object) {
	owners := obj.GetOwnerReferences()
	var live []metav1.OwnerReference
	for _, o := range owners {
		if _, ok := s.uids[o.UID]; ok {
			live = append(live, o)
		}
	}
	switch {
	case len(live) == len(owners):
	case len(live) == 0:
		_, _ = s.deleteLocked(r.kind, r.key.Namespace, r.key.Name, &metav1.DeleteOptions{})
	default:
		s.setOwnersLocked(r, obj, live)
	}
}

// collectDependentsLocked deletes every dependent of uid (a foreground
// deletion), whatever its other owners.
func (s *Server) collectDependentsLocked(uid types.UID) {
	for _, r := range s.dependentsLocked(uid) {
		_, _ = s.deleteLocked(r.kind, r.key.Namespace, r.key.Name, &metav1.DeleteOptions{})
	}
}

// orphanLocked removes the owner references to uid (an orphan deletion).
func (s *Server) orphanLocked(uid types.UID) {
	for _, r := range s.dependentsLocked(uid) {
		obj := s.objects[r.kind][r.key]
		var keep []metav1.OwnerReference
		for _, o := range obj.GetOwnerReferences() {
			if o.UID != uid {
				keep = append(keep, o)
			}
		}
		s.setOwnersLocked(r, obj, keep)
	}
}

func (s *Server) setOwnersLocked(r ref, obj object.Object, owners []metav1.OwnerReference) {
	next := obj.DeepCopyObject().(object.Object)
	next.SetOwnerReferences(owners)
	s.commitLocked(r.kind, watch.Modified, next, obj)
}

// copyStatus sets dst's Status field to src's (to zero if src is nil).
func copyStatus(dst, src runtime.Object) error {
	d := reflect.ValueOf(dst).Elem().FieldByName("Status")
	if !d.IsValid() || !d.CanSet() {
		return fmt.Errorf("fake: %T has no Status field", dst)
	}
	if src == nil {
		d.Set(reflect.Zero(d.Type()))
		return nil
	}
	v := reflect.ValueOf(src.DeepCopyObject()).Elem().FieldByName("Status")
	if !v.IsValid() || v.Type() != d.Type() {
		return fmt.Errorf("fake: status of %T does not fit %T", src, dst)
	}
	d.Set(v)
	return nil
}

// specChanged reports whether old and next differ in anything but their
// metadata and, when the status is a subresource, their status: what
// makes the generation change.
func specChanged(old, next runtime.Object, statusSubresource bool) (bool, error) {
	a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return false, err
	}
	b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return false, err
	}
	// The converter hands back an unstructured object's own map: compare
	// copies, so that the stored object keeps its metadata.
	a, b = maps.Clone(a), maps.Clone(b)
	for _, m := range []map[string]any{a, b} {
		delete(m, "metadata")
		if statusSubresource {
			delete(m, "status")
		}
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	return !apiequality.Semantic.DeepEqual(a, b), nil
}

func conflict(k *kind, name string, err error) error {
	return apierrors.NewConflict(k.gvr.GroupResource(), name, err)
}

func invalid(k *kind, name string, errs ...*field.Error) error {
	return apierrors.NewInvalid(k.gvk.GroupKind(), name, errs)
}

// uidConflict is kube-apiserver's answer (409) to an update whose UID
// precondition want the object (of UID got) fails.
func uidConflict(k *kind, name string, want, got types.UID) error {
	return conflict(k, name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", want, got))
}

// uidImmutable is kube-apiserver's answer (422) to a patch or apply that
// changes an object's UID to uid.
func uidImmutable(k *kind, name string, uid types.UID) error {
	return invalid(k, name, field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable"))
}
