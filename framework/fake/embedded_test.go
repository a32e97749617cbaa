package fake_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework/fake"
)

// widgetCRD serves thirdparty.example/v1 Widget, with a status subresource
// and a spec whose template is an embedded resource
// (x-kubernetes-embedded-resource), as a Deployment's pod template is.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	yes := true
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.thirdparty.example"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "thirdparty.example",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"color": str,
							"template": {Type: "object", XEmbeddedResource: true, Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"data": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}},
							}},
							"templates": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
								Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: &yes,
							}}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": str}},
					},
				}},
			}},
		},
	}
}

// widgets serves Widget (unstructured in the scheme) with widgetCRD.
func widgets(t *testing.T) dynamic.ResourceInterface {
	t.Helper()
	gvk := schema.GroupVersionKind{Group: "thirdparty.example", Version: "v1", Kind: "Widget"}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(gvk.GroupVersion().WithKind("WidgetList"), &unstructured.UnstructuredList{})
	srv := fake.Start(t, fake.Options{Scheme: s, CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}})
	return dynamic.NewForConfigOrDie(srv.Config()).Resource(gvk.GroupVersion().WithResource("widgets")).Namespace("ns")
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("thirdparty.example/v1")
	u.SetKind("Widget")
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// An embedded resource of a CRD's schema has apiVersion, kind and
// metadata, which kube-apiserver adds to its schema: a template that
// names them is accepted, by create, update and apply alike.
func TestCRDEmbeddedResourcesHaveTypeAndObjectMeta(t *testing.T) {
	ws := widgets(t)
	ctx := t.Context()
	template := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "labels": map[string]any{"app": "w"}},
		"data":     map[string]any{"a": "b"},
	}
	u := widget("w")
	_ = unstructured.SetNestedField(u.Object, template, "spec", "template")
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "type": "Opaque"}}, "spec", "templates")
	created, err := ws.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with an embedded template naming its kind: %v", err)
	}
	if kind, _, _ := unstructured.NestedString(created.Object, "spec", "template", "kind"); kind != "ConfigMap" {
		t.Errorf("the template's kind is %q, want ConfigMap", kind)
	}
	_ = unstructured.SetNestedField(created.Object, "Secret", "spec", "template", "kind")
	if _, err := ws.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update of the template's kind: %v", err)
	}
	a := widget("w")
	_ = unstructured.SetNestedField(a.Object, template, "spec", "template")
	if _, err := ws.Apply(ctx, "w", a, metav1.ApplyOptions{FieldManager: "m", Force: true}); err != nil {
		t.Fatalf("apply of the template: %v", err)
	}
	// What the schema does not declare is still refused there.
	bad := widget("bad")
	_ = unstructured.SetNestedField(bad.Object, map[string]any{"kind": "ConfigMap", "undeclared": "x"}, "spec", "template")
	if _, err := ws.Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Errorf("create with a field the template's schema lacks: no error, want it refused")
	}
}
