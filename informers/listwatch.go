package informers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/restset"
)

// transport is how an informer's lists and watches reach the API server, for
// a REST mapping m and namespace ns (empty for all namespaces or a
// cluster-scoped kind).
type transport struct {
	list  func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error)
	// listKeeping lists as list does, decoding only the items keep
	// accepts when it can (see decodeListKeeping); nil: it cannot.
	listKeeping func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions, keep func(namespace, uid string) bool) (runtime.Object, error)
}

// listWatch builds the ListerWatcher of an informer. The REST mapping is
// resolved on every request rather than once, so a kind whose CRD is installed
// after the informer was created starts working at the reflector's next retry.
func (c *Cache) listWatch(e *entry) (cache.ListerWatcher, error) {
	t, err := c.transport(e)
	if err != nil {
		return nil, err
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.list(ctx, e, t, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.watch(ctx, e, t, opts)
		},
	}, nil
}

// transport returns the transport of e's mode.
func (c *Cache) transport(e *entry) (transport, error) {
	switch e.key.mode {
	case Typed:
		return c.typedTransport(e)
	case Unstructured:
		return transport{
			list: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
				return c.dyn.Resource(m.Resource).Namespace(ns).List(ctx, opts)
			},
			watch: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
				return c.dyn.Resource(m.Resource).Namespace(ns).Watch(ctx, opts)
			},
		}, nil
	case Metadata:
		return transport{
			list: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
				return c.meta.Resource(m.Resource).Namespace(ns).List(ctx, opts)
			},
			watch: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
				return c.meta.Resource(m.Resource).Namespace(ns).Watch(ctx, opts)
			},
		}, nil
	}
	return transport{}, nil
}

// typedTransport returns the transport of a typed informer: a REST client of
// the kind's group version speaking protobuf when the list type supports it,
// else JSON (CBOR for custom resources, unless disabled).
func (c *Cache) typedTransport(e *entry) (transport, error) {
	gvk := e.key.gvk
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	listObj, err := c.opts.Scheme.New(listGVK)
	if err != nil {
		return transport{}, fmt.Errorf("informers: %s has no list type %s in the scheme: %w", e.desc, listGVK.Kind, err)
	}
	protobuf := supportsProtobuf(listObj)
	format := restset.JSON
	if protobuf {
		format = restset.Protobuf
	}
	rc, err := c.rest.For(gvk.GroupVersion(), format)
	if err != nil {
		return transport{}, fmt.Errorf("informers: %w", err)
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
	t := transport{
		list: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			out := listObj.DeepCopyObject()
			err := get(m, ns, &opts).Do(ctx).Into(out)
			return out, err
		},
		watch: func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return get(m, ns, &opts).Watch(ctx)
		},
	}
	if protobuf {
		t.listKeeping = func(ctx context.Context, m *meta.RESTMapping, ns string, opts metav1.ListOptions, keep func(namespace, uid string) bool) (runtime.Object, error) {
			out := listObj.DeepCopyObject()
			var contentType string
			res := get(m, ns, &opts).Do(ctx).ContentType(&contentType)
			body, err := res.Raw()
			if err != nil {
				return out, res.Into(out) // the request's error, as Into reports it
			}
			if contentType == runtime.ContentTypeProtobuf {
				if ok, err := decodeListKeeping(body, out, keep); ok || err != nil {
					return out, err
				}
			}
			return out, res.Into(out)
		}
	}
	return t, nil
}

// prepare resolves e's mapping and applies the informer's selection to opts.
func (c *Cache) prepare(ctx context.Context, e *entry, opts *metav1.ListOptions) (*meta.RESTMapping, string, error) {
	gvk := e.key.gvk
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
	if e.key.shard != "" {
		opts.ShardSelector = e.key.shard
		if !e.serverSharded.Load() {
			honoured, err := c.serverShards(ctx, m, ns, e.key.shard)
			if err != nil {
				return nil, "", fmt.Errorf("ask whether the API server applies shard selectors to %s: %w", m.Resource.GroupResource(), err)
			}
			e.serverSharded.Store(honoured)
		}
	}
	return m, ns, nil
}

// shared reports whether e's requests go through its kind's shardHub:
// when it has a shard selector the API server does not apply.
func (e *entry) shared() bool { return e.shard != nil && !e.serverSharded.Load() }

// list is the informer's list: through its kind's shardHub when shared,
// else filtered by its own shard selector, if any.
func (c *Cache) list(ctx context.Context, e *entry, t transport, opts metav1.ListOptions) (runtime.Object, error) {
	e.lists.Add(1)
	e.watching.Store(false)
	m, ns, err := c.prepare(ctx, e, &opts)
	if err == nil {
		var out runtime.Object
		if e.shared() {
			out, err = c.hub(e.key).List(ctx, opts, e.shard, func(ctx context.Context, opts metav1.ListOptions, keep func(namespace, uid string) bool) (runtime.Object, error) {
				if t.listKeeping != nil {
					return t.listKeeping(ctx, m, ns, opts, keep)
				}
				return t.list(ctx, m, ns, opts)
			})
		} else if out, err = t.list(ctx, m, ns, opts); err == nil {
			err = e.filterList(out)
		}
		if err == nil {
			e.recordResult(nil)
			return out, nil
		}
	}
	e.recordResult(err)
	e.reportError("list", err)
	return nil, err
}

// watch is the informer's watch: through its kind's shardHub when shared.
func (c *Cache) watch(ctx context.Context, e *entry, t transport, opts metav1.ListOptions) (watch.Interface, error) {
	streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	// Not watching until the request opens a stream: client-go retries a
	// watch request whose connection was refused or reset (about once a
	// second, up to ten times) before the informer sees an error.
	e.watching.Store(false)
	m, ns, err := c.prepare(ctx, e, &opts)
	if err == nil && e.shared() {
		if streaming {
			return nil, errHubStreaming // not an error of the informer: the reflector lists instead
		}
		var w watch.Interface
		if w, err = c.hub(e.key).Watch(ctx, opts, e.shard, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return t.watch(ctx, m, ns, opts)
		}); err == nil {
			e.recordResult(nil)
			e.watching.Store(true)
			return w, nil
		}
	} else if err == nil {
		if streaming {
			e.lists.Add(1) // a streaming list
		}
		var w watch.Interface
		if w, err = t.watch(ctx, m, ns, opts); err == nil {
			e.recordResult(nil)
			e.watching.Store(true)
			return w, nil
		}
	}
	e.recordResult(err)
	e.reportError("watch", err)
	return nil, err
}

// hub returns the shardHub of the informers equal to key's but for their
// shard selectors, making it on first use.
func (c *Cache) hub(key informerKey) *shardHub {
	key.shard = ""
	c.hubsMu.Lock()
	defer c.hubsMu.Unlock()
	h, ok := c.hubs[key]
	if !ok {
		if c.hubs == nil {
			c.hubs = map[informerKey]*shardHub{}
		}
		h = newShardHub(key.describe())
		c.hubs[key] = h
	}
	return h
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

// serverShards reports whether the API server applies shard selectors to
// m's resource: once per resource and Cache, it lists one object of
// namespace ns (or of every namespace, for "") with selector, and the
// server honoured it when the list says so (ListMeta.ShardInfo); a server
// without the ShardedListAndWatch feature ignores the parameter. Callers
// that ask at once (the informers of a kind's buckets, started together)
// share one list; one whose own context is live retries when the shared
// list ended with the context of the caller that sent it. A failed list is
// not remembered. The list is JSON through the dynamic client, not through
// the metadata client: Kubernetes 1.37 drops shardInfo when it answers as a
// PartialObjectMetadataList.
func (c *Cache) serverShards(ctx context.Context, m *meta.RESTMapping, ns, selector string) (bool, error) {
	gr := m.Resource.GroupResource()
	for {
		c.probeMu.Lock()
		honoured, ok := c.probed[gr]
		c.probeMu.Unlock()
		if ok {
			return honoured, nil
		}
		ch := c.probes.DoChan(gr.String(), func() (any, error) {
			list, err := c.dyn.Resource(m.Resource).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: selector})
			if err != nil {
				return false, err
			}
			_, honoured, _ := unstructured.NestedFieldNoCopy(list.Object, "metadata", "shardInfo")
			c.probeMu.Lock()
			c.probed[gr] = honoured
			c.probeMu.Unlock()
			return honoured, nil
		})
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case res := <-ch:
			if res.Err == nil {
				return res.Val.(bool), nil
			}
			if ctx.Err() == nil && (errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded)) {
				continue // the sender's context ended, not ours: ask again
			}
			return false, res.Err
		}
	}
}

// filterList drops the items of list outside e's shard, unless the server
// applied it: when the list says so (ListMeta.ShardInfo), or, for a list
// of a type that cannot say, when the probe said the server would. A
// metadata list never says (see serverShards): its items are filtered
// again, which keeps them all.
func (e *entry) filterList(list runtime.Object) error {
	if e.shard == nil {
		return nil
	}
	switch l := list.(type) {
	case metav1.ShardedListInterface:
		if l.GetShardInfo() != nil {
			return nil
		}
	case *unstructured.UnstructuredList:
		if _, found, _ := unstructured.NestedFieldNoCopy(l.Object, "metadata", "shardInfo"); found {
			return nil
		}
	default:
		if e.serverSharded.Load() {
			return nil
		}
	}
	if err := e.shard.filterList(list); err != nil {
		return fmt.Errorf("keep the objects of shard %s of the %T listed: %w", e.key.shard, list, err)
	}
	return nil
}
