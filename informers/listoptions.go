package informers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/converge-dev/converge/object"
)

// cachedFields are the fields a cache List can select on.
var cachedFields = map[string]bool{"metadata.name": true, "metadata.namespace": true}

// fieldMatcher returns a filter for sel, nil when sel selects everything,
// or an error naming the first field the cache cannot evaluate.
func (e *entry) fieldMatcher(sel fields.Selector) (func(object.Object) bool, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	for _, r := range sel.Requirements() {
		if !cachedFields[r.Field] {
			return nil, fmt.Errorf("list %s: field selector %q: the cache can select on metadata.name and metadata.namespace only, not %s: "+
				"narrow the informer with Selection.Fields (the API server evaluates it) or read without the cache (the framework's Manager.APIReader)",
				e.desc, sel, r.Field)
		}
	}
	return func(o object.Object) bool {
		return sel.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()})
	}, nil
}

// namespaceOf returns the namespace sel requires with metadata.namespace=ns,
// if any.
func namespaceOf(sel fields.Selector) (string, bool) {
	if sel == nil {
		return "", false
	}
	for _, r := range sel.Requirements() {
		if r.Field == "metadata.namespace" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return r.Value, true
		}
	}
	return "", false
}

// ListOption narrows a List.
type ListOption func(*ListOptions)

// ListOptions is what a List's options ask for; NewListOptions collects them.
// Readers other than the cache (client.APIReader) read them from here.
type ListOptions struct {
	// Namespace keeps objects in this namespace; "" means every namespace
	// the reader holds.
	Namespace string
	// Labels keeps objects whose labels match; nil means all.
	Labels labels.Selector
	// Fields keeps objects whose fields match; nil means all. The cache
	// evaluates metadata.name and metadata.namespace only; an uncached
	// reader passes the selector to the API server.
	Fields fields.Selector
	// Index and Value keep objects indexed under Value by the index named
	// Index (see Informer.AddIndex); "" means no index.
	Index, Value string
}

// NewListOptions returns the options opts set.
func NewListOptions(opts ...ListOption) ListOptions {
	var lo ListOptions
	for _, o := range opts {
		o(&lo)
	}
	return lo
}

// InNamespace keeps objects in namespace ns.
func InNamespace(ns string) ListOption { return func(o *ListOptions) { o.Namespace = ns } }

// MatchingLabels keeps objects whose labels match sel.
func MatchingLabels(sel labels.Selector) ListOption {
	return func(o *ListOptions) { o.Labels = sel }
}

// MatchingFields keeps objects whose fields match sel. Reads from the cache
// evaluate metadata.name and metadata.namespace, and fail on any other field
// (the cache holds decoded objects, not the API server's field sets): to
// select on spec.nodeName or status.phase, narrow the informer itself
// (Selection.Fields, evaluated by the API server) or read without the cache
// (a client.APIReader, such as the framework's Manager.APIReader, which
// passes sel to the server).
func MatchingFields(sel fields.Selector) ListOption {
	return func(o *ListOptions) { o.Fields = sel }
}

// MatchingIndex keeps objects indexed under value by the index named index
// (see Informer.AddIndex).
func MatchingIndex(index, value string) ListOption {
	return func(o *ListOptions) { o.Index, o.Value = index, value }
}
