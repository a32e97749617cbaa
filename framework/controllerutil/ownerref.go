package controllerutil

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// AlreadyOwnedError says that Object already has a controller, Owner, other
// than the one SetControllerReference was asked to set.
type AlreadyOwnedError struct {
	// Object is the object whose controller reference was to be set.
	Object metav1.Object
	// Owner is its current controller.
	Owner metav1.OwnerReference
}

func (e *AlreadyOwnedError) Error() string {
	return fmt.Sprintf("object %s is already controlled by %s %s (uid %s)",
		describe(e.Object), e.Owner.Kind, e.Owner.Name, e.Owner.UID)
}

// SetControllerReference makes owner the controller of obj: an owner
// reference with controller and blockOwnerDeletion set, so obj is deleted
// with owner and owner's controller is told of obj's changes. It replaces an
// existing reference to owner, and fails with an *AlreadyOwnedError when
// another object controls obj. scheme gives owner's kind when owner does not
// carry it (typed objects read from a cache do not).
func SetControllerReference(owner, obj object.Object, scheme *runtime.Scheme) error {
	ref, err := referenceTo(owner, obj, scheme)
	if err != nil {
		return err
	}
	if cur := metav1.GetControllerOfNoCopy(obj); cur != nil && !sameObject(*cur, ref) {
		return &AlreadyOwnedError{Object: obj, Owner: *cur}
	}
	ref.Controller, ref.BlockOwnerDeletion = new(true), new(true)
	upsertReference(obj, ref)
	return nil
}

// SetOwnerReference adds owner to obj's owner references without making it
// the controller (or updates the existing reference to owner, keeping its
// controller flag), so obj is deleted when its last owner is.
func SetOwnerReference(owner, obj object.Object, scheme *runtime.Scheme) error {
	ref, err := referenceTo(owner, obj, scheme)
	if err != nil {
		return err
	}
	for _, cur := range obj.GetOwnerReferences() {
		if sameObject(cur, ref) {
			ref.Controller, ref.BlockOwnerDeletion = cur.Controller, cur.BlockOwnerDeletion
		}
	}
	upsertReference(obj, ref)
	return nil
}

// RemoveOwnerReference removes the references to owner from obj and reports
// whether there was one.
func RemoveOwnerReference(owner, obj object.Object, scheme *runtime.Scheme) (bool, error) {
	ref, err := referenceTo(owner, obj, scheme)
	if err != nil {
		return false, err
	}
	refs := obj.GetOwnerReferences()
	kept := refs[:0:0]
	for _, cur := range refs {
		if !sameObject(cur, ref) {
			kept = append(kept, cur)
		}
	}
	if len(kept) == len(refs) {
		return false, nil
	}
	obj.SetOwnerReferences(kept)
	return true, nil
}

// HasControllerReference reports whether obj has a controller owner; a nil
// obj has none.
func HasControllerReference(obj metav1.Object) bool {
	return !typednil.Is(obj) && metav1.GetControllerOfNoCopy(obj) != nil
}

// referenceTo builds an owner reference to owner for obj, checking that
// Kubernetes allows it: the owner must be cluster-scoped or in obj's
// namespace, and must have a name and UID (it must have been read from or
// written to the API server). Neither may be nil.
func referenceTo(owner, obj object.Object, scheme *runtime.Scheme) (metav1.OwnerReference, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("owner reference: %w", err)
	}
	if err := typednil.Check("owner", owner); err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("owner reference on %s: %w", describe(obj), err)
	}
	gvk, err := kindOf(owner, scheme)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("owner reference on %s: %w", describe(obj), err)
	}
	switch {
	case owner.GetName() == "" || owner.GetUID() == "":
		return metav1.OwnerReference{}, fmt.Errorf("owner reference on %s: owner %s %s has no name or UID; use the owner as read from the API server",
			describe(obj), gvk.Kind, describe(owner))
	case owner.GetNamespace() != "" && owner.GetNamespace() != obj.GetNamespace():
		return metav1.OwnerReference{}, fmt.Errorf("owner reference on %s: owner %s %s is in another namespace; an owner must be cluster-scoped or in the object's namespace",
			describe(obj), gvk.Kind, describe(owner))
	}
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Name: owner.GetName(), UID: owner.GetUID(),
	}, nil
}

func kindOf(obj object.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	if scheme == nil {
		return schema.GroupVersionKind{}, fmt.Errorf("%T carries no apiVersion and kind, and no scheme was given", obj)
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("kind of %T: %w", obj, err)
	}
	return gvks[0], nil
}

// sameObject reports whether two references name one object: same group,
// kind and name (the version may differ).
func sameObject(a, b metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

func upsertReference(obj metav1.Object, ref metav1.OwnerReference) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if sameObject(refs[i], ref) {
			refs[i] = ref
			obj.SetOwnerReferences(refs)
			return
		}
	}
	obj.SetOwnerReferences(append(refs, ref))
}

func describe(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
