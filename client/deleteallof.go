package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// DeleteAllOf deletes every object of example's kind that sel selects, in
// one request (the API server's deletecollection): sel.Namespace (zero means
// example's namespace; a namespaced kind needs one), sel.Labels and
// sel.Fields (the server evaluates them: any field the kind supports); zero
// selectors mean every object in the namespace. sel.Kind names the kind for
// *unstructured.Unstructured and *metav1.PartialObjectMetadata examples.
// Propagation sets how dependents are treated; MatchingUID does not apply.
//
// The server deletes objects one by one and may fail part way: the error
// then says so, and some objects may already be gone.
//
// Reads from the cache then no longer show the objects the server removed
// at once: the server answers with the objects it deleted, as it listed
// them, and those without finalizers (deleted with Background propagation
// or the kind's default, and not Pods, which terminate gracefully) are
// marked deleted, as Delete marks one. Objects that finalizers or a
// grace period hold stay in the cache, with their deletion timestamp once
// the watch delivers it.
func (c *Client) DeleteAllOf(ctx context.Context, example object.Object, sel informers.Selection, opts ...WriteOption) (err error) {
	defer func() { err = inCluster(c.cluster, err) }()
	if err := typednil.Check("example", example); err != nil {
		return fmt.Errorf("delete all of: %w", err)
	}
	wo := collect(opts)
	gvk, err := KindOf(c.scheme, example)
	if !sel.Kind.Empty() {
		gvk, err = sel.Kind, nil
	}
	ns := sel.Namespace
	if ns == "" {
		ns = example.GetNamespace()
	}
	what := fmt.Sprintf("delete all of %s", gvk.Kind)
	if ns != "" {
		what += " in namespace " + ns
	}
	if err != nil {
		return fmt.Errorf("delete all of %T: %w", example, err)
	}
	if wo.precondition != nil {
		return fmt.Errorf("%s: MatchingUID names one object and does not apply to a collection", what)
	}
	if err := c.fence(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced && ns == "" {
		return fmt.Errorf("%s: %s is namespaced: give the namespace (Selection.Namespace or the example's)", what, gvk.Kind)
	}
	rc, err := c.rest(gvk.GroupVersion())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var lo metav1.ListOptions
	if sel.Labels != nil && !sel.Labels.Empty() {
		lo.LabelSelector = sel.Labels.String()
	}
	if sel.Fields != nil && !sel.Fields.Empty() {
		lo.FieldSelector = sel.Fields.String()
	}
	req := rc.Verb(http.MethodDelete).NamespaceIfScoped(ns, namespaced).Resource(m.Resource.Resource).
		VersionedParams(&lo, metav1.ParameterCodec).
		SetHeader("Accept", metadataAccept("PartialObjectMetadataList")+", application/json").
		Body(&metav1.DeleteOptions{PropagationPolicy: wo.propagation})
	res := req.Do(c.requestContext(ctx))
	if err := res.Error(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.observeCollectionDeletion(gvk, wo.propagation, res)
	return nil
}

// observeCollectionDeletion marks deleted the objects of a deletecollection
// answer that the server removed at once (see DeleteAllOf). An answer that
// is not a list (a Status from some API servers) marks nothing.
func (c *Client) observeCollectionDeletion(gvk schema.GroupVersionKind, propagation *metav1.DeletionPropagation, res rest.Result) {
	if gvk.Group == "" && gvk.Kind == "Pod" {
		return // pods terminate gracefully: they stay, with a deletion timestamp
	}
	if propagation != nil && *propagation != metav1.DeletePropagationBackground {
		return // orphan and foreground deletions add a finalizer
	}
	raw, err := res.Raw()
	if err != nil {
		return
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Namespace         string    `json:"namespace"`
				Name              string    `json:"name"`
				UID               types.UID `json:"uid"`
				Finalizers        []string  `json:"finalizers"`
				DeletionTimestamp *string   `json:"deletionTimestamp"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, it := range list.Items {
		md := it.Metadata
		if len(md.Finalizers) > 0 || md.DeletionTimestamp != nil || md.UID == "" {
			continue
		}
		c.cache.ObserveDeletion(gvk, &metav1.ObjectMeta{Namespace: md.Namespace, Name: md.Name, UID: md.UID})
	}
}
