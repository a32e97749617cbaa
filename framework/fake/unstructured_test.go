package fake_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// A custom resource with no Go type, registered in the scheme as
// unstructured, is served like the others, and converge's client and cache
// read and write it.
func TestUnstructuredKind(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "thirdparty.example", Version: "v1", Kind: "Widget"}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(gvk.GroupVersion().WithKind("WidgetList"), &unstructured.UnstructuredList{})
	seed := &unstructured.Unstructured{}
	seed.SetGroupVersionKind(gvk)
	seed.SetNamespace("ns")
	seed.SetName("seeded")
	_ = unstructured.SetNestedField(seed.Object, "blue", "spec", "color")
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{seed}})

	dc := dynamic.NewForConfigOrDie(srv.Config())
	widgets := dc.Resource(gvk.GroupVersion().WithResource("widgets")).Namespace("ns")
	got, err := widgets.Get(t.Context(), "seeded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(got.Object, "spec", "color"); c != "blue" || got.GetGeneration() != 1 {
		t.Errorf("seeded widget: color %q, generation %d; want blue, 1", c, got.GetGeneration())
	}

	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Scheme: s})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager.Start: %v", err)
		}
	})
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(gvk)
	w.SetNamespace("ns")
	w.SetName("made")
	_ = unstructured.SetNestedField(w.Object, "red", "spec", "color")
	if err := mgr.Client().Create(t.Context(), w); err != nil {
		t.Fatalf("create through the manager's client: %v", err)
	}
	_ = unstructured.SetNestedField(w.Object, "green", "spec", "color")
	if err := mgr.Client().Update(t.Context(), w); err != nil {
		t.Fatalf("update through the manager's client: %v", err)
	}
	if w.GetGeneration() != 2 {
		t.Errorf("after a spec update: generation %d, want 2", w.GetGeneration())
	}
	eventually(t, "the cache reads the widget", func(ctx context.Context) (bool, error) {
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(gvk)
		if err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: "ns", Name: "made"}, r); err != nil {
			return false, err
		}
		c, _, _ := unstructured.NestedString(r.Object, "spec", "color")
		return c == "green", nil
	})
}
