package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// APIReader reads objects straight from the API server, without the cache:
// it creates no informer, watches nothing, and each call is one request.
// Use it for the reads the cache cannot serve: objects outside the cache's
// namespace or selection, kinds the identity may get but not list and watch,
// and one-off reads of kinds not worth caching. Its answers are as fresh as
// the API server's, and it never waits for the cache.
//
// It reads typed objects (registered in the scheme),
// *unstructured.Unstructured and *metav1.PartialObjectMetadata, the last two
// with apiVersion and kind set. Results are the caller's to modify. Build one
// with NewAPIReader, or get the manager's with framework's
// Manager.APIReader. An APIReader is safe for concurrent use.
type APIReader struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	// rest returns the REST client of a group version.
	rest func(schema.GroupVersion) (*rest.RESTClient, error)
	// logger adjusts the logger client-go logs each request to.
	logger func(logr.Logger) logr.Logger
	// cluster is Options.Cluster, named by each error.
	cluster string
}

// Get reads the object key from the API server into obj. Its error is the
// server's (apierrors.IsNotFound, IsForbidden, ...), wrapped with what was
// read.
func (r *APIReader) Get(ctx context.Context, key types.NamespacedName, obj object.Object) (err error) {
	defer func() { err = inCluster(r.cluster, err) }()
	if err := typednil.Check("obj", obj); err != nil {
		return fmt.Errorf("get %s without the cache: %w", describeKey(&metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}), err)
	}
	what := fmt.Sprintf("get %T %s without the cache", obj, describeKey(&metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}))
	gvk, err := KindOf(r.scheme, obj)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	what = fmt.Sprintf("get %s %s without the cache", gvk.Kind, describeKey(&metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}))
	if key.Name == "" {
		return fmt.Errorf("%s: the name is empty", what)
	}
	req, err := r.request(gvk, key.Namespace, true)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		req = req.SetHeader("Accept", metadataAccept("PartialObjectMetadata"))
	}
	if err := r.into(req.Name(key.Name).Do(quietly(ctx, r.logger)), obj, gvk); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	noteRead(ctx, r.scheme, obj)
	return nil
}

// List reads the objects matching opts from the API server into list, a
// list type such as *corev1.ConfigMapList, *unstructured.UnstructuredList or
// *metav1.PartialObjectMetadataList (the last two with apiVersion and kind
// set, as "FooList"). informers.InNamespace, informers.MatchingLabels and
// informers.MatchingFields apply (the API server evaluates the field
// selector: any field the kind supports); without a namespace, a namespaced kind is listed in every
// namespace. informers.MatchingIndex needs the cache and is an error here.
func (r *APIReader) List(ctx context.Context, list runtime.Object, opts ...informers.ListOption) (err error) {
	defer func() { err = inCluster(r.cluster, err) }()
	if err := typednil.Check("list", list); err != nil {
		return fmt.Errorf("list without the cache: %w", err)
	}
	lo := informers.NewListOptions(opts...)
	gvk, err := KindOf(r.scheme, list)
	what := fmt.Sprintf("list %T without the cache", list)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !strings.HasSuffix(gvk.Kind, "List") {
		return fmt.Errorf("%s: kind %q is not a list kind (FooList)", what, gvk.Kind)
	}
	item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
	what = fmt.Sprintf("list %s without the cache", item.Kind)
	if lo.Namespace != "" {
		what += " in namespace " + lo.Namespace
	}
	if lo.Index != "" {
		return fmt.Errorf("%s: index %q: indexes are the cache's; use the Client", what, lo.Index)
	}
	req, err := r.request(item, lo.Namespace, false)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var params metav1.ListOptions
	if lo.Labels != nil && !lo.Labels.Empty() {
		params.LabelSelector = lo.Labels.String()
	}
	if lo.Fields != nil && !lo.Fields.Empty() {
		params.FieldSelector = lo.Fields.String()
	}
	if params != (metav1.ListOptions{}) {
		req = req.VersionedParams(&params, metav1.ParameterCodec)
	}
	if _, ok := list.(*metav1.PartialObjectMetadataList); ok {
		req = req.SetHeader("Accept", metadataAccept("PartialObjectMetadataList"))
	}
	if err := r.into(req.Do(quietly(ctx, r.logger)), list, gvk); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	noteList(ctx, r.scheme, list)
	return nil
}

// request starts a GET of kind gvk in namespace ns (ignored for kinds
// without namespaces). named says whether it reads one object, which for a
// namespaced kind needs a namespace.
func (r *APIReader) request(gvk schema.GroupVersionKind, ns string, named bool) (*rest.Request, error) {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if named && namespaced && ns == "" {
		return nil, fmt.Errorf("%s is namespaced but no namespace was given", gvk.Kind)
	}
	rc, err := r.rest(gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	return rc.Get().NamespaceIfScoped(ns, namespaced && ns != "").Resource(m.Resource.Resource), nil
}

// into decodes the answer res into out and sets its kind.
func (r *APIReader) into(res rest.Result, out runtime.Object, gvk schema.GroupVersionKind) error {
	if err := res.Error(); err != nil {
		return err
	}
	switch o := out.(type) {
	case *unstructured.Unstructured, *unstructured.UnstructuredList:
		raw, err := res.Raw()
		if err != nil {
			return err
		}
		if err := o.(interface{ UnmarshalJSON([]byte) error }).UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		raw, err := res.Raw()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, o); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
	default:
		if err := res.Into(out); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// metadataAccept asks the API server for metadata only, as kind
// (PartialObjectMetadata or PartialObjectMetadataList).
func metadataAccept(kind string) string {
	return "application/json;as=" + kind + ";g=meta.k8s.io;v=v1"
}
