package fake

import (
	"encoding/json"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// crdTypeConverter returns the type converter of the custom resources of
// crds, from their structural schemas, as kube-apiserver builds it for
// server-side apply: each served version's openAPIV3Schema with
// apiVersion, kind and metadata (ObjectMeta's schema) at its top and in
// each embedded resource (addEmbeddedProperties), and with the kinds it
// serves.
func crdTypeConverter(crds []*apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, map[schema.GroupVersionKind]bool, error) {
	models := map[string]*spec.Schema{}
	for name, def := range apiextensionsopenapi.GetOpenAPIDefinitions(modelRef) {
		models[name] = &def.Schema
	}
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	kinds := map[schema.GroupVersionKind]bool{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			s := &spec.Schema{}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
				if err != nil {
					return nil, nil, fmt.Errorf("CRD %s: version %s: encode schema: %w", crd.Name, v.Name, err)
				}
				if err := json.Unmarshal(raw, s); err != nil {
					return nil, nil, fmt.Errorf("CRD %s: version %s: decode schema: %w", crd.Name, v.Name, err)
				}
			}
			if s.Properties == nil {
				s.Properties = map[string]spec.Schema{}
			}
			for _, f := range []string{"apiVersion", "kind"} {
				s.Properties[f] = *spec.StringProperty()
			}
			s.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{Ref: modelRef(objectMeta)}}
			addEmbeddedProperties(s, objectMeta)
			s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
			models[fmt.Sprintf("%s.%s.%s", crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = s
			kinds[gvk] = true
		}
	}
	// apiextensions.k8s.io/v1 refuses spec.preserveUnknownFields: true;
	// x-kubernetes-preserve-unknown-fields in a schema is honoured.
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, nil, fmt.Errorf("schemas of the CRDs: %w", err)
	}
	return tc, kinds, nil
}

// addEmbeddedProperties gives every object of s marked
// x-kubernetes-embedded-resource (a template of another object) the
// properties apiVersion, kind and metadata (ObjectMeta's schema), required
// kind and apiVersion, as kube-apiserver does to a CRD's schema before
// using it (addEmbeddedProperties of apiextensions-apiserver's OpenAPI
// builder, for OpenAPI v3, which is not exported).
func addEmbeddedProperties(s *spec.Schema, objectMeta string) {
	if s == nil {
		return
	}
	for k, v := range s.Properties {
		addEmbeddedProperties(&v, objectMeta)
		s.Properties[k] = v
	}
	if s.Items != nil {
		addEmbeddedProperties(s.Items.Schema, objectMeta)
		for i := range s.Items.Schemas {
			addEmbeddedProperties(&s.Items.Schemas[i], objectMeta)
		}
	}
	if s.AdditionalProperties != nil {
		addEmbeddedProperties(s.AdditionalProperties.Schema, objectMeta)
	}
	if embedded, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); !ok || !embedded {
		return
	}
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	for _, f := range []string{"apiVersion", "kind"} {
		s.Properties[f] = *spec.StringProperty()
		if !slices.Contains(s.Required, f) {
			s.Required = append(s.Required, f)
		}
	}
	s.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{Ref: modelRef(objectMeta)}}
}

// modelRef refers to the OpenAPI model called name.
func modelRef(name string) spec.Ref {
	return spec.MustCreateRef("#/components/schemas/" + name)
}
