package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/restset"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// DefaultFieldManager is the field manager converge's writes are recorded
// under (metadata.managedFields) unless a write names another.
const DefaultFieldManager = "converge"

// Client reads from the shared cache and writes to the API server.
//
// Reads (Get, List) return deep copies the caller owns; for read-only access
// without copies, use informers.For on the cache. Reads wait for the cache
// to show this process's own writes (see informers.Reader); reads the cache
// cannot serve (another namespace, an object outside the labels or fields
// informers.Options.ByKind narrows its kind to, a kind the identity may not
// list and watch) fail rather than report NotFound: use an APIReader (the
// manager's APIReader) for those. Get of a kind narrowed by labels or
// fields confirms a miss with the API server (see informers.Cache.Get). Writes update the object passed in with the
// server's answer (its new resourceVersion, defaults and status). Every
// error names the object and the operation.
//
// A client refuses writes while its fence (Options.Fence) fails, and its
// errors wrap the fence's. The manager's client is fenced once writes could
// be wrong: after the process lost leadership (framework.ErrNotLeader) and
// once the manager stopped (framework.ErrManagerStopped), so that no write
// leaves a process another may have replaced, even from a reconcile that
// ignores its context. The check is made as each request is sent, after
// client-side rate limiting; a request already sent when leadership is lost
// may still be applied. Leader election bounds that window: the leader
// gives up at RenewDeadline, and another process may take over only after
// Lease.Duration, so a request that reaches the API server within
// Lease.Duration − RenewDeadline of the loss is applied before a new leader
// runs.
//
// A Client is safe for concurrent use.
type Client struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	cache  *informers.Cache
	// rest returns the REST client of a group version, whose transport
	// refuses a request when the fence in its context fails (see
	// restset.WithFence).
	rest func(schema.GroupVersion) (*rest.RESTClient, error)
	// allowWrite says whether a write may be sent now: nil, or why not.
	allowWrite func() error
	// logger adjusts the logger client-go logs each request to.
	logger func(logr.Logger) logr.Logger
	// cluster is Options.Cluster, named by each error.
	cluster string
}

// inCluster returns err naming cluster, the cluster a client talks to
// (Options.Cluster); err as it is when either is empty.
func inCluster(cluster string, err error) error {
	if err == nil || cluster == "" {
		return err
	}
	return fmt.Errorf("cluster %s: %w", cluster, err)
}

// errorf is fmt.Errorf naming the client's cluster (inCluster).
func (c *Client) errorf(format string, args ...any) error {
	return inCluster(c.cluster, fmt.Errorf(format, args...))
}

// Get copies the cached object key into obj; see informers.Cache.Get for
// what a miss answers.
func (c *Client) Get(ctx context.Context, key types.NamespacedName, obj object.Object) error {
	if err := typednil.Check("obj", obj); err != nil {
		return c.errorf("get %s: %w", describeKey(&metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}), err)
	}
	if err := c.cache.Get(ctx, key, obj); err != nil {
		return inCluster(c.cluster, err)
	}
	noteRead(ctx, c.scheme, obj)
	return nil
}

// List copies the cached objects matching opts into list (a *FooList).
func (c *Client) List(ctx context.Context, list runtime.Object, opts ...informers.ListOption) error {
	if err := typednil.Check("list", list); err != nil {
		return c.errorf("list: %w", err)
	}
	if err := c.cache.List(ctx, list, opts...); err != nil {
		return inCluster(c.cluster, err)
	}
	noteList(ctx, c.scheme, list)
	return nil
}

// WriteOption modifies one write.
type WriteOption func(*writeOptions)

type writeOptions struct {
	fieldManager string
	force        bool
	propagation  *metav1.DeletionPropagation
	precondition *metav1.Preconditions
}

func collect(opts []WriteOption) writeOptions {
	wo := writeOptions{fieldManager: DefaultFieldManager}
	for _, o := range opts {
		o(&wo)
	}
	return wo
}

// FieldManager records the write under manager instead of DefaultFieldManager.
func FieldManager(manager string) WriteOption {
	return func(o *writeOptions) { o.fieldManager = manager }
}

// ForceOwnership makes a server-side apply take fields other managers own
// instead of failing with a conflict.
func ForceOwnership() WriteOption { return func(o *writeOptions) { o.force = true } }

// Propagation sets how a deletion treats the object's dependents.
func Propagation(p metav1.DeletionPropagation) WriteOption {
	return func(o *writeOptions) { o.propagation = &p }
}

// MatchingUID makes a deletion apply only to the object with this UID, not to
// a newer object of the same name.
func MatchingUID(uid types.UID) WriteOption {
	return func(o *writeOptions) { o.precondition = &metav1.Preconditions{UID: &uid} }
}

// Create creates obj.
func (c *Client) Create(ctx context.Context, obj object.Object, opts ...WriteOption) error {
	wo := collect(opts)
	return c.do(ctx, "create", obj, "", func(r *rest.Request, _ version, _ bool) (*rest.Request, string) {
		return r.Verb(http.MethodPost).VersionedParams(&metav1.CreateOptions{FieldManager: wo.fieldManager}, metav1.ParameterCodec).Body(obj), ""
	}, false)
}

// Update replaces obj; it fails with a conflict when obj's resourceVersion is
// not the latest.
func (c *Client) Update(ctx context.Context, obj object.Object, opts ...WriteOption) error {
	return c.update(ctx, obj, "", opts)
}

func (c *Client) update(ctx context.Context, obj object.Object, sub string, opts []WriteOption) error {
	wo := collect(opts)
	return c.do(ctx, "update", obj, sub, func(r *rest.Request, pre version, ok bool) (*rest.Request, string) {
		if ok && obj.GetResourceVersion() == "" {
			// Sent with the version read, then given the server's answer
			// (or, on an error, left without one again).
			obj.SetResourceVersion(pre.rv)
			defer obj.SetResourceVersion("")
			return r.Verb(http.MethodPut).VersionedParams(&metav1.UpdateOptions{FieldManager: wo.fieldManager}, metav1.ParameterCodec).Body(obj), pre.rv
		}
		return r.Verb(http.MethodPut).VersionedParams(&metav1.UpdateOptions{FieldManager: wo.fieldManager}, metav1.ParameterCodec).Body(obj), ""
	}, true)
}

// Patch applies a patch of type pt (JSON merge, strategic merge or JSON
// patch) to obj.
func (c *Client) Patch(ctx context.Context, obj object.Object, pt types.PatchType, data []byte, opts ...WriteOption) error {
	return c.patch(ctx, obj, "", pt, data, opts)
}

func (c *Client) patch(ctx context.Context, obj object.Object, sub string, pt types.PatchType, data []byte, opts []WriteOption) error {
	wo := collect(opts)
	po := &metav1.PatchOptions{FieldManager: wo.fieldManager}
	if pt == types.ApplyPatchType || pt == types.ApplyCBORPatchType {
		po.Force = &wo.force
	}
	return c.do(ctx, "patch", obj, sub, func(r *rest.Request, pre version, ok bool) (*rest.Request, string) {
		added := ""
		if ok {
			var with bool
			if data, with = withResourceVersion(pt, data, pre.rv); with {
				added = pre.rv
			}
		}
		return r.Verb(http.MethodPatch).SetHeader("Content-Type", string(pt)).VersionedParams(po, metav1.ParameterCodec).Body(data), added
	}, true)
}

// Delete deletes obj. Deleting an object that is already gone returns an
// error for which apierrors.IsNotFound is true.
func (c *Client) Delete(ctx context.Context, obj object.Object, opts ...WriteOption) error {
	wo := collect(opts)
	do := &metav1.DeleteOptions{PropagationPolicy: wo.propagation, Preconditions: wo.precondition}
	return c.do(ctx, "delete", obj, "", func(r *rest.Request, pre version, ok bool) (*rest.Request, string) {
		if !ok {
			return r.Verb(http.MethodDelete).Body(do), ""
		}
		with := *do
		p := metav1.Preconditions{ResourceVersion: &pre.rv}
		if do.Preconditions != nil {
			p.UID = do.Preconditions.UID
		}
		if p.UID == nil && pre.uid != "" {
			p.UID = &pre.uid
		}
		with.Preconditions = &p
		return r.Verb(http.MethodDelete).Body(&with), pre.rv
	}, true)
}

// Apply server-side applies obj: obj states the fields this field manager
// wants to own and their values; fields it owned before and leaves out are
// removed. obj is a typed object, an *unstructured.Unstructured, or a
// client-go apply configuration (k8s.io/client-go/applyconfigurations), and
// must carry apiVersion, kind, name (and namespace for namespaced kinds).
// Typed objects are sent as they marshal, so their zero-valued fields that do
// not omit empty are applied too: prefer apply configurations or unstructured.
//
// Apply returns the object as the server stored it: typed when the scheme
// knows its kind, unstructured otherwise.
func (c *Client) Apply(ctx context.Context, obj any, opts ...WriteOption) (object.Object, error) {
	return c.apply(ctx, obj, "", opts)
}

func (c *Client) apply(ctx context.Context, obj any, sub string, opts []WriteOption) (object.Object, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return nil, c.errorf("apply: %w", err)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, c.errorf("apply %T: encode: %w", obj, err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, c.errorf("apply %T: decode head: %w", obj, err)
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil || head.Kind == "" || head.Metadata.Name == "" {
		return nil, c.errorf("apply %T %s/%s: apiVersion, kind and metadata.name are required (got %q, %q, %q)",
			obj, head.Metadata.Namespace, head.Metadata.Name, head.APIVersion, head.Kind, head.Metadata.Name)
	}
	gvk := gv.WithKind(head.Kind)
	out, err := NewObject(c.scheme, gvk)
	if err != nil {
		return nil, c.errorf("apply %s %s/%s: %w", head.Kind, head.Metadata.Namespace, head.Metadata.Name, err)
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	out.SetNamespace(head.Metadata.Namespace)
	out.SetName(head.Metadata.Name)
	if err := c.patch(ctx, out, sub, types.ApplyPatchType, data, opts); err != nil {
		return nil, err
	}
	return out, nil
}

// Status returns a writer for the status subresource.
func (c *Client) Status() StatusWriter { return StatusWriter{c: c} }

// StatusWriter writes the status subresource, which kinds with one ignore in
// ordinary writes.
type StatusWriter struct{ c *Client }

// Update replaces obj's status.
func (s StatusWriter) Update(ctx context.Context, obj object.Object, opts ...WriteOption) error {
	return s.c.update(ctx, obj, "status", opts)
}

// Patch patches obj's status.
func (s StatusWriter) Patch(ctx context.Context, obj object.Object, pt types.PatchType, data []byte, opts ...WriteOption) error {
	return s.c.patch(ctx, obj, "status", pt, data, opts)
}

// Apply server-side applies obj's status. See Client.Apply.
func (s StatusWriter) Apply(ctx context.Context, obj any, opts ...WriteOption) (object.Object, error) {
	return s.c.apply(ctx, obj, "status", opts)
}

// do sends one request about obj and decodes the answer into obj. build
// builds the request, given the precondition WithPreconditions asks for
// (ok is false for none), and returns the resourceVersion it made the
// write conditional on, "" for none.
func (c *Client) do(ctx context.Context, verb string, obj object.Object, sub string, build func(r *rest.Request, pre version, ok bool) (*rest.Request, string), named bool) (err error) {
	defer func() { err = inCluster(c.cluster, err) }()
	if err := typednil.Check("obj", obj); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	gvk, err := KindOf(c.scheme, obj)
	if err != nil {
		return fmt.Errorf("%s %T %s: %w", verb, obj, describeKey(obj), err)
	}
	what := fmt.Sprintf("%s %s %s", verb, gvk.Kind, describeKey(obj))
	if sub != "" {
		what += " " + sub
	}
	if err := c.fence(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	rc, err := c.rest(gvk.GroupVersion())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced && obj.GetNamespace() == "" {
		return fmt.Errorf("%s: %s is namespaced but the object has no namespace", what, gvk.Kind)
	}
	req := rc.Verb("").NamespaceIfScoped(obj.GetNamespace(), namespaced).Resource(m.Resource.Resource)
	if named {
		if obj.GetName() == "" {
			return fmt.Errorf("%s: the object has no name", what)
		}
		req = req.Name(obj.GetName())
	}
	if sub != "" {
		req = req.SubResource(sub)
	}
	key := objectKey{gk: gvk.GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
	pre, ok := precondition(ctx, key)
	req, added := build(req, pre, ok)
	res := req.Do(c.requestContext(ctx))
	if err := res.Error(); err != nil {
		if added != "" && apierrors.IsConflict(err) {
			return fmt.Errorf("%s: the object changed since it was read at resourceVersion %s: %w", what, added, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if verb == "delete" {
		if vs := versionsFrom(ctx); vs != nil {
			vs.forget(key)
		}
		c.observeDeletion(gvk, obj, res)
		return nil
	}
	if err := decodeAnswer(res, obj, gvk); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && gracePassed(obj) {
		// The write removed the last finalizer of an object being deleted:
		// it is gone, though the answer shows it as it was.
		if vs := versionsFrom(ctx); vs != nil {
			vs.forget(key)
		}
		c.cache.ObserveDeletion(gvk, obj)
		return nil
	}
	c.cache.ObserveWrite(gvk, obj)
	if vs := versionsFrom(ctx); vs != nil {
		vs.wrote(key, obj)
	}
	return nil
}

// decodeAnswer decodes the API server's answer res into obj, of kind gvk.
func decodeAnswer(res rest.Result, obj object.Object, gvk schema.GroupVersionKind) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		raw, err := res.Raw()
		if err != nil {
			return err
		}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		return nil
	}
	if err := res.Into(obj); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// requestContext returns the context a write is sent on: fenced by
// allowWrite and by the fence restset.WithWriteFence put in ctx, if any, logging to the
// adjusted logger.
func (c *Client) requestContext(ctx context.Context) context.Context {
	fence := c.allowWrite
	if own := ctxFence(ctx); own != nil {
		fence = func() error { return c.fenced(own) }
	}
	return restset.WithFence(quietly(ctx, c.logger), fence)
}

// fence says whether a write on ctx may be sent now: the client's fence,
// then ctx's (restset.WithWriteFence).
func (c *Client) fence(ctx context.Context) error { return c.fenced(ctxFence(ctx)) }

// fenced is the client's fence, then own when not nil.
func (c *Client) fenced(own func() error) error {
	if err := c.allowWrite(); err != nil {
		return err
	}
	if own != nil {
		return own()
	}
	return nil
}

// ctxFence returns the fence restset.WithWriteFence put in ctx, nil for
// none.
func ctxFence(ctx context.Context) func() error { return restset.WriteFence(ctx) }

// observeDeletion tells the cache about a deletion: gone at once (the
// server answered with a Status, which names the deleted object's UID in
// details.uid, or with the object without a deletion timestamp), or still
// there with a deletion timestamp (the server answered with the object,
// held by finalizers).
func (c *Client) observeDeletion(gvk schema.GroupVersionKind, obj object.Object, res rest.Result) {
	raw, err := res.Raw()
	if err != nil {
		return
	}
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			ResourceVersion   string            `json:"resourceVersion"`
			UID               types.UID         `json:"uid"`
			Labels            map[string]string `json:"labels"`
			DeletionTimestamp *string           `json:"deletionTimestamp"`
		} `json:"metadata"`
		Details struct {
			UID types.UID `json:"uid"`
		} `json:"details"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return
	}
	gone := &metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
	switch {
	case head.Kind == "Status":
		if head.Details.UID != "" {
			gone.UID = head.Details.UID
		}
	case head.Metadata.DeletionTimestamp == nil:
		if head.Metadata.UID != "" {
			gone.UID = head.Metadata.UID
		}
	default:
		c.cache.ObserveWrite(gvk, &metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(),
			ResourceVersion: head.Metadata.ResourceVersion, Labels: head.Metadata.Labels})
		return
	}
	c.cache.ObserveDeletion(gvk, gone)
}

// gracePassed reports whether obj, being deleted, no longer waits for a
// grace period: the server removes it once its finalizers are gone. A pod
// terminating gracefully (deletionGracePeriodSeconds above zero) stays,
// finalizers or not, until its kubelet confirms the termination.
func gracePassed(obj metav1.Object) bool {
	g := obj.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

func describeKey(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// KindOf returns obj's kind: from scheme for typed objects and lists, from
// the object's own apiVersion and kind for unstructured and metadata-only
// ones (which must carry them).
func KindOf(scheme *runtime.Scheme, obj runtime.Object) (schema.GroupVersionKind, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return schema.GroupVersionKind{}, err
	}
	switch obj.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata, *unstructured.UnstructuredList, *metav1.PartialObjectMetadataList:
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return gvk, errors.New("apiVersion and kind must be set on unstructured and metadata objects")
		}
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("%T is not registered in the client's scheme: %w", obj, err)
	}
	return gvks[0], nil
}
