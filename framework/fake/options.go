package fake

import (
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// Options configures a Server.
type Options struct {
	// Scheme holds every kind the server serves: each kind of the scheme
	// with metadata and a <Kind>List is served at the resource its kind
	// guesses (Deployment → deployments). Zero means client-go's scheme of
	// built-in types; add your own types to a new scheme (with
	// clientgoscheme.AddToScheme for the built-ins) to serve them. A kind
	// with no Go type (a third party's custom resource) is served when
	// registered as *unstructured.Unstructured, with
	// *unstructured.UnstructuredList as its list, without a status
	// subresource.
	Scheme *runtime.Scheme

	// Objects are stored before the server answers its first request, as
	// if created in this order: they get a UID, a creationTimestamp, a
	// generation (1, for kinds that keep one) and a resourceVersion, and
	// keep their status; a resourceVersion they name is replaced. Each needs
	// a name, and a namespace when its kind is namespaced. One with a
	// deletionTimestamp is stored terminating, and must have a finalizer.
	// Zero means none.
	Objects []object.Object

	// ClusterScoped lists, by an example object, the kinds of Scheme that
	// are not namespaced besides the built-in ones (Namespace, Node,
	// ClusterRole, ...), which the server knows. Zero means every other kind
	// is namespaced.
	ClusterScoped []object.Object

	// NoStatusSubresource lists, by an example object, kinds that have a
	// Status field but no status subresource: their status is written with
	// the rest of the object. Zero means every kind whose Go type has a
	// Status field has a status subresource, as CRDs generated with
	// +kubebuilder:subresource:status and most built-in kinds do.
	NoStatusSubresource []object.Object

	// CRDs are the CustomResourceDefinitions of the custom resources of
	// Scheme, as a real cluster (or envtest, given the same CRDs) has them
	// installed. Server-side apply then manages a custom resource's fields
	// from its version's structural schema, as kube-apiserver does: a list
	// with x-kubernetes-list-type map merges element by element on its
	// x-kubernetes-list-map-keys (status conditions by type, so two
	// managers each keep their own), a set by value, and atomic lists and
	// maps are owned whole; metadata is ObjectMeta's. A CRD of scope
	// Cluster makes its kind cluster-scoped, and a version without a status
	// subresource has none, as if listed in ClusterScoped and
	// NoStatusSubresource. Each CRD must serve a version of a kind in
	// Scheme. Zero means none: a custom resource is then managed as its
	// CRD conventionally declares it: metadata is ObjectMeta's,
	// status.conditions merges by type (two managers each keep their own
	// condition, as with a CRD generated for []metav1.Condition), and the
	// rest is deduced from each object, so maps merge by field and other
	// lists are atomic.
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	for i, obj := range o.Objects {
		if typednil.Is(obj) {
			errs = append(errs, fmt.Errorf("Options.Objects[%d] is nil (%T)", i, obj))
			continue
		}
		if obj.GetName() == "" && obj.GetGenerateName() == "" {
			errs = append(errs, fmt.Errorf("Options.Objects[%d] (%T) has no name", i, obj))
		}
	}
	for field, list := range map[string][]object.Object{"ClusterScoped": o.ClusterScoped, "NoStatusSubresource": o.NoStatusSubresource} {
		for i, obj := range list {
			if typednil.Is(obj) {
				errs = append(errs, fmt.Errorf("Options.%s[%d] is nil (%T)", field, i, obj))
			} else if _, _, err := o.Scheme.ObjectKinds(obj); err != nil {
				errs = append(errs, fmt.Errorf("Options.%s[%d]: %w", field, i, err))
			}
		}
	}
	for i, crd := range o.CRDs {
		if typednil.Is(crd) {
			errs = append(errs, fmt.Errorf("Options.CRDs[%d] is nil", i))
			continue
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || o.Scheme.Recognizes(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
		}
		if !served {
			errs = append(errs, fmt.Errorf("Options.CRDs[%d] (%s): no version of %s.%s is in Options.Scheme", i, crd.Name, crd.Spec.Names.Kind, crd.Spec.Group))
		}
	}
	return errors.Join(errs...)
}

// crdScopes returns the kinds the CRDs make cluster-scoped, and those
// without a status subresource.
func (o Options) crdScopes() (clusterScoped, noStatus []schema.GroupVersionKind) {
	for _, crd := range o.CRDs {
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
				clusterScoped = append(clusterScoped, gvk)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				noStatus = append(noStatus, gvk)
			}
		}
	}
	return clusterScoped, noStatus
}
