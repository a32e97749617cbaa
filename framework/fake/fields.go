package fake

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/converge-dev/converge/object"
)

// typeConverter converts objects to structured values for field
// management: with client-go's schemas for the built-in kinds (so lists
// such as containers merge by key), with their CRDs' schemas for the
// custom resources of Options.CRDs, and with the conventional schema of a
// custom resource for the others (see conventionalCRD).
type typeConverter struct {
	known, crds, deduced managedfields.TypeConverter
	// crdKinds are the kinds of Options.CRDs.
	crdKinds map[schema.GroupVersionKind]bool
	// deducedKinds are the kinds client-go has no schema for: a
	// schema.GroupVersionKind → bool cache.
	deducedKinds *sync.Map
	// conventional holds the converter of each kind deducedKinds holds,
	// made at its first use: a schema.GroupVersionKind →
	// managedfields.TypeConverter cache.
	conventional *sync.Map
}

var _ managedfields.TypeConverter = typeConverter{}

func newTypeConverter(s *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) (typeConverter, error) {
	c := typeConverter{known: applyconfigurations.NewTypeConverter(s), deduced: managedfields.NewDeducedTypeConverter(), deducedKinds: &sync.Map{}, conventional: &sync.Map{}}
	if len(crds) > 0 {
		var err error
		if c.crds, c.crdKinds, err = crdTypeConverter(crds); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c typeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if c.crdKinds[gvk] {
		return c.crds.ObjectToTyped(obj, opts...)
	}
	deduced, ok := c.deducedKinds.Load(gvk)
	if !ok {
		// client-go knows a kind's schema or not: ask with an empty object.
		empty := &unstructured.Unstructured{}
		empty.SetGroupVersionKind(gvk)
		_, err := c.known.ObjectToTyped(empty)
		deduced, _ = c.deducedKinds.LoadOrStore(gvk, err != nil)
	}
	if !deduced.(bool) {
		return c.known.ObjectToTyped(obj, opts...)
	}
	tc, ok := c.conventional.Load(gvk)
	if !ok {
		made, _, err := crdTypeConverter([]*apiextensionsv1.CustomResourceDefinition{conventionalCRD(gvk)})
		if err != nil {
			return nil, fmt.Errorf("fake: schema of %v: %w", gvk, err)
		}
		tc, _ = c.conventional.LoadOrStore(gvk, made)
	}
	if v, err := tc.(managedfields.TypeConverter).ObjectToTyped(obj, opts...); err == nil {
		return v, nil
	}
	// Conditions without a type, say: nothing is known of the object.
	return c.deduced.ObjectToTyped(obj, opts...)
}

// conventionalCRD is the CRD of gvk that a custom resource without one in
// Options.CRDs is managed with: its metadata is ObjectMeta's and
// status.conditions is a list of objects keyed by type, as the API
// conventions say and as CRDs generated for []metav1.Condition declare
// (x-kubernetes-list-type map, so two managers each keep their own
// condition); every other field is deduced from the object (maps merge by
// field, lists are atomic).
func conventionalCRD(gvk schema.GroupVersionKind) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	listMap := "map"
	condition := apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: &preserve, Required: []string{"type"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"type": {Type: "string"}},
	}
	status := apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: &preserve,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"conditions": {
			Type: "array", XListType: &listMap, XListMapKeys: []string{"type"},
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
		}},
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "conventional." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: gvk.Version, Schema: &apiextensionsv1.CustomResourceValidation{
				OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": status},
				},
			}}},
		},
	}
}

func (c typeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.known.TypedToObject(v)
}

// managerKey names one field manager: a kind and a subresource.
type managerKey struct {
	kind *kind
	sub  string
}

// fieldManagerLocked returns the field manager of k's subresource sub
// ("" or "status"). The status subresource owns the status only; the main
// resource owns everything else when k has a status subresource. A
// custom resource's status subresource owns none of the metadata either
// (its writes keep the old metadata, see updateLocked).
func (s *Server) fieldManagerLocked(k *kind, sub string) (*managedfields.FieldManager, error) {
	key := managerKey{kind: k, sub: sub}
	if fm, ok := s.managers[key]; ok {
		return fm, nil
	}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if k.status {
		paths := []fieldpath.Path{fieldpath.MakePathOrDie("status")}
		if sub == "status" {
			paths = []fieldpath.Path{fieldpath.MakePathOrDie("spec")}
			if k.custom() {
				// kube-apiserver's status strategy of custom resources
				// keeps the old metadata too.
				paths = append(paths, fieldpath.MakePathOrDie("metadata"))
			}
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(k.gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...)),
		}
	}
	fm, err := managedfields.NewDefaultFieldManager(s.types, s.scheme, noDefaults{}, s.scheme, k.gvk, k.gvk.GroupVersion(), sub, reset)
	if err != nil {
		return nil, fmt.Errorf("fake: field manager for %s: %w", k, err)
	}
	s.managers[key] = fm
	return fm, nil
}

// noDefaults is the defaulter of the field managers: the server applies
// no defaults.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// recordUpdate records a non-apply write of next (over old) under manager
// in next's managedFields.
func (s *Server) recordUpdate(k *kind, sub string, old, next object.Object, manager string) (object.Object, error) {
	fm, err := s.fieldManagerLocked(k, sub)
	if err != nil {
		return nil, err
	}
	out, err := fm.Update(old.DeepCopyObject(), next, manager) // old is shared: the field manager gets a copy
	if err != nil {
		return nil, fmt.Errorf("fake: managed fields of %s %s: %w", k, describe(next), err)
	}
	return s.typedObject(k, out)
}

// typedObject returns obj as k's Go type.
func (s *Server) typedObject(k *kind, obj runtime.Object) (object.Object, error) {
	if o, ok := obj.(object.Object); ok {
		if _, unstructured := obj.(runtime.Unstructured); !unstructured {
			o.GetObjectKind().SetGroupVersionKind(k.gvk)
			return o, nil
		}
	}
	out, err := s.newObject(k)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("fake: %T is not a %s", obj, k.gvk)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return nil, fmt.Errorf("fake: decode %s: %w", k.gvk, err)
	}
	out.GetObjectKind().SetGroupVersionKind(k.gvk)
	return out, nil
}

func describe(obj object.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
