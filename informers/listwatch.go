package informers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/restset"
)

// listWatch builds the ListerWatcher of an informer. The REST mapping is
// resolved on every request rather than once, so a kind whose CRD is installed
// after the informer was created starts working at the reflector's next retry.
func (c *Cache) listWatch(e *entry) (cache.ListerWatcher, error) {
	gvk := e.key.gvk
	var (
		list    func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error)
		watchFn func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error)
	)
	switch e.key.mode {
	case Typed:
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		listObj, err := c.opts.Scheme.New(listGVK)
		if err != nil {
			return nil, fmt.Errorf("informers: %s has no list type %s in the scheme: %w", e.desc, listGVK.Kind, err)
		}
		protobuf := supportsProtobuf(listObj)
		format := restset.JSON
		if protobuf {
			format = restset.Protobuf
		}
		rc, err := c.rest.For(gvk.GroupVersion(), format)
		if err != nil {
			return nil, fmt.Errorf("informers: %w", err)
		}
		// get builds a list or watch request; custom resources ask for CBOR.
		get := func(m *meta.RESTMapping, ns string, opts *metav1.ListOptions) *rest.Request {
			req := rc.Get().NamespaceIfScoped(ns, ns != "").Resource(m.Resource.Resource).
				VersionedParams(opts, metav1.ParameterCodec)
			if !protobuf && !c.opts.DisableCBOR {
				req.SetHeader("Accept", cborAccept)
			}
			return req
		}
		list = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			out := listObj.DeepCopyObject()
			err := get(m, ns, &opts).Do(ctx).Into(out)
			return out, err
		}
		watchFn = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return get(m, ns, &opts).Watch(ctx)
		}
	case Unstructured:
		list = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			return c.dyn.Resource(m.Resource).Namespace(ns).List(ctx, opts)
		}
		watchFn = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			return c.dyn.Resource(m.Resource).Namespace(ns).Watch(ctx, opts)
		}
	case Metadata:
		list = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			return c.meta.Resource(m.Resource).Namespace(ns).List(ctx, opts)
		}
		watchFn = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			return c.meta.Resource(m.Resource).Namespace(ns).Watch(ctx, opts)
		}
	}

	// prepare resolves the mapping and applies the informer's selection.
	prepare := func(ctx context.Context, opts *metav1.ListOptions) (*meta.RESTMapping, string, error) {
		m, err := c.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, "", fmt.Errorf("map %s to a resource: %w", describe(gvk), err)
		}
		e.mapping.Store(m)
		ns := e.key.namespace
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			ns = ""
		}
		opts.LabelSelector = e.key.labels
		opts.FieldSelector = e.key.fields
		return m, ns, nil
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			e.lists.Add(1)
			m, ns, err := prepare(ctx, &opts)
			if err == nil {
				var out runtime.Object
				if out, err = list(ctx, m, ns, opts); err == nil {
					e.recordResult(nil)
					return out, nil
				}
			}
			e.recordResult(err)
			e.reportError("list", err)
			return nil, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				e.lists.Add(1) // a streaming list
			}
			m, ns, err := prepare(ctx, &opts)
			if err == nil {
				var w watch.Interface
				if w, err = watchFn(ctx, m, ns, opts); err == nil {
					e.recordResult(nil)
					return w, nil
				}
			}
			e.recordResult(err)
			e.reportError("watch", err)
			return nil, err
		},
	}, nil
}

// supportsProtobuf reports whether obj (a list type) can be decoded from
// protobuf, which all built-in Kubernetes types can and custom types cannot.
func supportsProtobuf(obj runtime.Object) bool {
	_, ok := obj.(interface {
		Reset()
		Unmarshal([]byte) error
	})
	return ok
}
