package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Get copies the cached object key into into, for callers that hold
// an object of a type known only at run time. The kind comes from into's Go
// type (or its apiVersion and kind, for unstructured and metadata objects).
// Unlike Informer.Get, the result is a deep copy the caller owns.
//
// The informer read is the kind's default (Options.ByKind, else
// Options.Namespace). When Options.ByKind narrows it by labels or fields,
// the cache cannot tell an object that does not exist from one outside the
// selection, so a miss is confirmed with the API server (one GET of the
// object's metadata, which needs get permission on the kind): Get answers
// NotFound when the server does, and an error wrapping ErrNotCached that
// names the selection when the object exists but the cache does not hold
// it. When the server cannot be asked, the error wraps both ErrNotCached
// and the server's answer. Reads inside the selection, and every read of
// a kind without a label or field selection, ask nobody. A kind whose
// reads the framework routes to a sharded controller's held buckets is read
// from those buckets' informers instead. A kind no informer holds in into's
// mode gets one, kept from then on, unless Options.RefuseUnwatchedReads
// refuses the read (see there); List does the same.
func (c *Cache) Get(ctx context.Context, key types.NamespacedName, into object.Object) error {
	namespace, name := key.Namespace, key.Name
	if err := typednil.Check("into", into); err != nil {
		return fmt.Errorf("informers: get %s: %w", cache.NewObjectName(namespace, name), err)
	}
	if r, base, ok := c.routeFor(into); ok {
		return c.routedGet(ctx, r, base, key, into)
	}
	inf, err := c.untyped(into)
	if errors.Is(err, errRouted) {
		return c.Get(ctx, key, into) // the route's whole informer went away
	}
	if err != nil {
		return err
	}
	stored, err := inf.stored(ctx, key)
	if err != nil {
		return c.confirmMiss(ctx, inf.e, namespace, name, err)
	}
	obj, err := owned(inf.e, stored)
	if err != nil {
		return err
	}
	return copyInto(obj, into, inf.Kind())
}

// owned returns a copy of stored, an object informer e holds, that the
// caller owns: a compact kind's record decoded anew (the decoded object
// kept, if any, deep-copied), else a deep copy.
func owned(e *entry, stored any) (runtime.Object, error) {
	if r, ok := stored.(*compactObject); ok {
		if d := r.codec.decoded; d != nil {
			if obj, ok := d.get(r); ok {
				return obj.DeepCopyObject(), nil
			}
		}
		obj, err := r.decode()
		if err != nil {
			return nil, fmt.Errorf("%s: decode cached %s: %w", e.desc, r.key(), err)
		}
		return obj, nil
	}
	obj, err := as[object.Object](e, stored)
	if err != nil {
		return nil, err
	}
	return obj.DeepCopyObject(), nil
}

// confirmMiss answers a read of e that ended in err. A NotFound from an
// informer narrowed by labels or fields is confirmed by asking the API
// server for the object's metadata: notFound (e's answer) when the server
// has no such object either, or when the object is one e's label selector
// holds (the cache has not seen it yet, as any cache may lag), else an
// error wrapping ErrNotCached naming e's selection. Any other err, and a
// NotFound of an informer of the whole kind, is answered as it is.
func (c *Cache) confirmMiss(ctx context.Context, e *entry, namespace, name string, notFound error) error {
	if !apierrors.IsNotFound(notFound) || e.key.labels == "" && e.key.fields == "" {
		return notFound
	}
	what := "get " + describe(e.key.gvk) + " " + cache.NewObjectName(namespace, name).String()
	m := e.mapping.Load() // set by the list that synced e
	if m == nil {
		return notFound
	}
	res := c.meta.Resource(m.Resource)
	var (
		live *metav1.PartialObjectMetadata
		err  error
	)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		live, err = res.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	} else {
		live, err = res.Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return notFound
	case err != nil:
		return fmt.Errorf("%s: the cache holds only %s (Options.ByKind) and does not hold it; "+
			"asking the API server whether it exists failed: %w: %w", what, e.desc, ErrNotCached, err)
	case e.key.fields == "" && e.selector != nil && e.selector.Matches(labels.Set(live.Labels)):
		return notFound
	}
	return fmt.Errorf("%s: it exists, but the cache holds only %s (Options.ByKind): "+
		"read it without the cache (the framework's Manager.APIReader) or widen the kind's selection: %w",
		what, e.desc, ErrNotCached)
}

// List copies the cached objects matching opts into list, a list type such as
// *corev1.PodList, *unstructured.UnstructuredList or
// *metav1.PartialObjectMetadataList (the last two with apiVersion and kind
// set, as "FooList"). The items are deep copies the caller owns. A kind
// routed to held buckets is listed from its held buckets' informers.
func (c *Cache) List(ctx context.Context, list runtime.Object, opts ...ListOption) error {
	if err := typednil.Check("list", list); err != nil {
		return fmt.Errorf("informers: list: %w", err)
	}
	item, err := c.itemFor(list)
	if err != nil {
		return err
	}
	var (
		objs []object.Object
		gvk  schema.GroupVersionKind
		rv   string
		what string
		// copied says whether objs are copies already.
		copied bool
	)
	if r, base, ok := c.routeFor(item); ok {
		if objs, gvk, rv, err = c.routedList(ctx, r, base, opts); err != nil {
			return err
		}
		what = describe(gvk) + " from its held buckets"
	} else {
		inf, err := c.untyped(item)
		if errors.Is(err, errRouted) {
			return c.List(ctx, list, opts...) // the route's whole informer went away
		}
		if err != nil {
			return err
		}
		if objs, err = inf.list(ctx, true, opts...); err != nil {
			return err
		}
		gvk, rv, what, copied = inf.Kind(), inf.LastSyncResourceVersion(), inf.String(), true
	}
	items := make([]runtime.Object, len(objs))
	for i, o := range objs {
		var cp runtime.Object = o
		if !copied {
			cp = o.DeepCopyObject()
		}
		cp.GetObjectKind().SetGroupVersionKind(gvk)
		items[i] = cp
	}
	if err := meta.SetList(list, items); err != nil {
		return fmt.Errorf("list %s: fill %T: %w", what, list, err)
	}
	if lm, err := meta.ListAccessor(list); err == nil {
		lm.SetResourceVersion(rv)
	}
	return nil
}

// untyped returns the informer for obj's kind with the default selection.
// The informer is not pinned: when it cannot sync because the identity may
// not list or watch the kind, the read fails and the cache drops it.
func (c *Cache) untyped(obj object.Object) (*Informer[object.Object], error) {
	return forObject(c, obj, Selection{}, false)
}

// itemFor returns an empty item of the list type list.
func (c *Cache) itemFor(list runtime.Object) (object.Object, error) {
	var gvk schema.GroupVersionKind
	switch list.(type) {
	case *unstructured.UnstructuredList, *metav1.PartialObjectMetadataList:
		gvk = list.GetObjectKind().GroupVersionKind()
	default:
		gvks, _, err := c.opts.Scheme.ObjectKinds(list)
		if err != nil {
			return nil, fmt.Errorf("informers: %T is not registered in the scheme: %w", list, err)
		}
		gvk = gvks[0]
	}
	if !strings.HasSuffix(gvk.Kind, "List") {
		return nil, fmt.Errorf("informers: %T has kind %q, which is not a list kind (FooList)", list, gvk.Kind)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	switch list.(type) {
	case *unstructured.UnstructuredList:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case *metav1.PartialObjectMetadataList:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m, nil
	}
	obj, err := c.opts.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("informers: no item type for %T: %w", list, err)
	}
	o, ok := obj.(object.Object)
	if !ok {
		return nil, fmt.Errorf("informers: %T has no object metadata", obj)
	}
	return o, nil
}

// copyInto moves the (already copied) object src into dst, which has the same
// Go type, and sets its kind.
func copyInto(src runtime.Object, dst object.Object, gvk schema.GroupVersionKind) error {
	if u, ok := dst.(*unstructured.Unstructured); ok {
		su, ok := src.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("informers: cannot copy %T into %T", src, dst)
		}
		u.Object = su.Object
		u.SetGroupVersionKind(gvk)
		return nil
	}
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Type() != sv.Type() {
		return fmt.Errorf("informers: cannot copy %T into %T", src, dst)
	}
	dv.Elem().Set(sv.Elem())
	dst.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
