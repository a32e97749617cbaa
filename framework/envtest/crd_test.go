package envtest_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

var (
	widgets = schema.GroupVersionResource{Group: "example.converge.dev", Version: "v1", Resource: "widgets"}
	gadgets = schema.GroupVersionResource{Group: "example.converge.dev", Version: "v1alpha1", Resource: "gadgets"}
)

// widget returns a Widget called name in ns.
func widget(ns, name string, size int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.converge.dev/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{"size": size},
	}}
}

// dynamicClient returns a dynamic client for cfg.
func dynamicClient(t *testing.T, cfg *rest.Config) *dynamic.DynamicClient {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return dyn
}

func TestInstallCRDsFromFile(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	ctx := t.Context()
	cfg := env.Config()
	ns := newNamespace(t, clientset(t, cfg))

	// Install twice: the second run updates, and both return once the CRDs are usable.
	for range 2 {
		if err := env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{"testdata/crds/widgets.yaml"}}); err != nil {
			t.Fatalf("InstallCRDs: %v", err)
		}
	}

	// No retry: InstallCRDs promises the resources are served when it returns.
	dyn := dynamicClient(t, cfg)
	if _, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, widget(ns, "w1", 3), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Widget: %v", err)
	}
	got, err := dyn.Resource(widgets).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Widget: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Errorf("Widget spec.size = %d, want 3", size)
	}
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.converge.dev/v1alpha1", "kind": "Gadget",
		"metadata": map[string]any{"name": ns + "-g1"}, "anything": "goes",
	}}
	if _, err := dyn.Resource(gadgets).Create(ctx, gadget, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Gadget (second document of the file): %v", err)
	}
	// The schema is enforced: a negative size is rejected.
	if _, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, widget(ns, "w2", -1), metav1.CreateOptions{}); err == nil {
		t.Error("a Widget with spec.size -1 was accepted; want the CRD's schema to reject it")
	}
}

func TestInstallCRDsFromObjects(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "cogs.example.converge.dev"},
		"spec": map[string]any{
			"group": "example.converge.dev",
			"names": map[string]any{"kind": "Cog", "plural": "cogs"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if err := env.InstallCRDs(t.Context(), envtest.CRDOptions{Objects: []runtime.Object{crd}}); err != nil {
		t.Fatalf("InstallCRDs: %v", err)
	}
	cogs := schema.GroupVersionResource{Group: "example.converge.dev", Version: "v1", Resource: "cogs"}
	if _, err := dynamicClient(t, env.Config()).Resource(cogs).Namespace("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list Cogs: %v", err)
	}
}

func TestInstallCRDsRejectsOtherKinds(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	err := env.InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{"testdata/not-a-crd.yaml"}})
	for _, s := range []string{"testdata/not-a-crd.yaml", "document 2", `/v1, Kind=ConfigMap "not-a-crd" is not a CustomResourceDefinition`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("InstallCRDs error = %v, want one containing %q", err, s)
		}
	}
	err = env.InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{"testdata/missing.yaml"}})
	if err == nil || !strings.Contains(err.Error(), "testdata/missing.yaml") {
		t.Errorf("InstallCRDs of a missing file = %v, want an error naming it", err)
	}
}
