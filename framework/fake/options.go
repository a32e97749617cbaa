package fake

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
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
	return errors.Join(errs...)
}
