package declarative

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// liveKey is the context key of the liveView Reconcile hands Desired.
type liveKey struct{}

// liveView is what LiveChild and LiveChildren read: the children of one
// parent, through the Declarative reconciling it.
type liveView struct {
	d      liveReader
	parent object.Object
}

// liveReader is the part of a Declarative[T] a liveView needs, without T.
type liveReader interface {
	kindOf(example object.Object) (*childKind, error)
	labelled(ctx context.Context, ck *childKind, parent object.Object) ([]object.Object, error)
	namespaced(ck *childKind) (bool, error)
	groupResource(ck *childKind) schema.GroupResource
	owns(parent, obj metav1.Object) bool
}

// withLive returns ctx carrying the live children of parent, for Desired.
func withLive(ctx context.Context, d liveReader, parent object.Object) context.Context {
	return context.WithValue(ctx, liveKey{}, &liveView{d: d, parent: parent})
}

// LiveChild returns the child of example's kind named name as the cache
// holds it now, status included: in the parent's namespace for namespaced
// kinds (a cluster-scoped parent's namespaced children are found with
// LiveChildren). Call it from Desired, with the context Desired was given, to build
// the parent's status from its children's (a Deployment's
// availableReplicas, say) in the same reconcile: a change to a child
// reconciles its parent, so Desired sees each change.
//
// Only the parent's own children are seen: objects of a kind listed in
// Options.ChildKinds that the parent owns (see the package documentation).
// Any other object, such as one of the same name that another parent or no
// one owns, is reported as not found (apierrors.IsNotFound), like a child
// not created yet, and so is any object of an optional kind the API server
// does not serve (see Options.RequiredKinds).
//
// The child is shared with the cache: do not modify it. Other errors name
// the cause: example's kind is not in Options.ChildKinds, or ctx does not come
// from Desired.
func LiveChild[C object.Object](ctx context.Context, example C, name string) (C, error) {
	var zero C
	v, ck, err := liveKind(ctx, example)
	if err != nil {
		return zero, fmt.Errorf("declarative.LiveChild %s: %w", name, err)
	}
	namespaced, err := v.d.namespaced(ck)
	if notServed(ck, err) {
		return zero, apierrors.NewNotFound(v.d.groupResource(ck), name) // no object of a kind not served
	}
	if err != nil {
		return zero, fmt.Errorf("declarative.LiveChild %s %s: %w", ck.gvk.Kind, name, err)
	}
	ns := ""
	if namespaced {
		ns = v.parent.GetNamespace()
	}
	obj, err := ck.cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: name})
	switch {
	case apierrors.IsNotFound(err):
		return zero, err
	case err != nil:
		return zero, fmt.Errorf("declarative.LiveChild %s %s: %w", ck.gvk.Kind, key(ns, name), err)
	case !v.owns(obj):
		return zero, apierrors.NewNotFound(v.d.groupResource(ck), name)
	}
	c, ok := obj.(C)
	if !ok {
		return zero, fmt.Errorf("declarative.LiveChild %s %s: the cache holds a %T, not a %T", ck.gvk.Kind, key(ns, name), obj, example)
	}
	return c, nil
}

// LiveChildren returns every child of example's kind the parent has, as the
// cache holds them, sorted by namespace and name: LiveChild for children
// whose names Desired does not know, or that live in other namespaces. The
// same rules apply.
func LiveChildren[C object.Object](ctx context.Context, example C) ([]C, error) {
	v, ck, err := liveKind(ctx, example)
	if err != nil {
		return nil, fmt.Errorf("declarative.LiveChildren: %w", err)
	}
	objs, err := v.d.labelled(ctx, ck, v.parent)
	if err != nil {
		return nil, fmt.Errorf("declarative.LiveChildren: %w", err)
	}
	out := make([]C, 0, len(objs))
	for _, obj := range objs {
		if !v.owns(obj) {
			continue
		}
		c, ok := obj.(C)
		if !ok {
			return nil, fmt.Errorf("declarative.LiveChildren %s: the cache holds %T, not %T", ck.gvk.Kind, obj, example)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b C) int {
		return cmp.Compare(key(a.GetNamespace(), a.GetName()), key(b.GetNamespace(), b.GetName()))
	})
	return out, nil
}

func liveKind(ctx context.Context, example object.Object) (*liveView, *childKind, error) {
	v, _ := ctx.Value(liveKey{}).(*liveView)
	if v == nil {
		return nil, nil, errors.New("the context holds no parent: call it from Desired, with the context Desired was given")
	}
	if typednil.Is(example) {
		return nil, nil, errors.New("example object is nil")
	}
	ck, err := v.d.kindOf(example)
	if err != nil {
		return nil, nil, err
	}
	return v, ck, nil
}

// owns reports whether the parent owns obj (see Declarative.owns).
func (v *liveView) owns(obj object.Object) bool { return v.d.owns(v.parent, obj) }

// kindOf returns the child kind of example, which must be listed in
// Options.ChildKinds.
func (d *Declarative[T]) kindOf(example object.Object) (*childKind, error) {
	gvk := example.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		gvks, _, err := d.mgr.Scheme().ObjectKinds(example)
		if err != nil {
			return nil, fmt.Errorf("type %T is not registered in the manager's scheme: %w", example, err)
		}
		gvk = gvks[0]
	}
	ck, ok := d.children[gvk.GroupKind()]
	if !ok {
		return nil, fmt.Errorf("kind %v is not in declarative.Options.ChildKinds", gvk.GroupKind())
	}
	return ck, nil
}

// groupResource names ck's resource for errors.
func (d *Declarative[T]) groupResource(ck *childKind) schema.GroupResource {
	if m, err := d.mgr.RESTMapper().RESTMapping(ck.gvk.GroupKind(), ck.gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: ck.gvk.Group, Resource: ck.gvk.Kind}
}
