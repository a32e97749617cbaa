package informers_test

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

// A kind's mapping discovers its own API group only (/api or
// /apis/<group>, and the group's versions), never the list of every
// group; a group the server does not serve is a no-match error; a resource
// named without a group may be in any group and is found.
func TestRESTMapperDiscoversOnlyTheKindsGroup(t *testing.T) {
	var log requestLog
	m, err := informers.NewRESTMapper(log.wrap(plane.Config(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"})
	if err != nil || mapping.Resource != (schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}) {
		t.Fatalf("RESTMapping(ConfigMap) = %+v, %v; want v1 configmaps", mapping, err)
	}
	mapping, err = m.RESTMapping(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"})
	if err != nil || mapping.Resource.Resource != "leases" || mapping.Resource.Version != "v1" {
		t.Fatalf("RESTMapping(Lease) = %+v, %v; want coordination.k8s.io/v1 leases", mapping, err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "nothing.example.com", Kind: "Thing"}); !meta.IsNoMatchError(err) {
		t.Errorf("RESTMapping of a group not served = %v, want a no-match error", err)
	}
	log.mu.Lock()
	var paths []string
	for _, r := range log.requests {
		paths = append(paths, r.path)
	}
	log.mu.Unlock()
	for _, p := range paths {
		if p == "/apis" || (!strings.HasPrefix(p, "/api/") && p != "/api" && !strings.HasPrefix(p, "/apis/coordination.k8s.io") && !strings.HasPrefix(p, "/apis/nothing.example.com")) {
			t.Errorf("mapping ConfigMap and Lease requested %s; requests: %v", p, paths)
		}
	}
	gvk, err := m.KindFor(schema.GroupVersionResource{Resource: "deployments"})
	if err != nil || gvk != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		t.Errorf("KindFor(deployments) = %v, %v; want apps/v1 Deployment", gvk, err)
	}
}

// A kind whose CRD is installed after its group was discovered (a second
// CRD of the group) is found after a miss, without a new mapper.
func TestRESTMapperFindsAKindAddedToADiscoveredGroup(t *testing.T) {
	const group = "mapper.converge.example.com"
	first := mapperCRD(group, "Apple", "apples")
	second := mapperCRD(group, "Pear", "pears")
	installMapperCRD(t, first)
	m, err := informers.NewRESTMapper(plane.Config(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Apple"}); err != nil {
		t.Fatalf("RESTMapping(Apple): %v", err)
	}
	installMapperCRD(t, second)
	// A miss refreshes discovery at most once a second, and a new CRD takes
	// a moment to be served.
	var mapping *meta.RESTMapping
	testenv.Eventually(t, "Pear mapped", func() bool {
		mapping, err = m.RESTMapping(schema.GroupKind{Group: group, Kind: "Pear"})
		if err != nil && !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping(Pear): %v", err)
		}
		return err == nil
	})
	if mapping.Resource.Resource != "pears" {
		t.Errorf("RESTMapping(Pear) = %v, want pears", mapping.Resource)
	}
}

func mapperCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
}

// installMapperCRD installs crd on the shared control plane and deletes it
// when the test ends.
func installMapperCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := plane.Environment().InstallCRDs(t.Context(), envtest.CRDOptions{Objects: []runtime.Object{&unstructured.Unstructured{Object: obj}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		crds := dynamic.NewForConfigOrDie(plane.Config(t)).Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
		if err := crds.Delete(context.WithoutCancel(t.Context()), crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}
