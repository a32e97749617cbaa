package framework_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// lamp is a kind whose CRD TestWhenServed installs while a controller
// watching it runs.
var lamp = schema.GroupVersionKind{Group: "served.framework.converge.dev", Version: "v1", Kind: "Lamp"}

func lampCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "lamps." + lamp.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: lamp.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: lamp.Kind, ListKind: lamp.Kind + "List", Plural: "lamps", Singular: "lamp"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: lamp.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
}

// TestWhenServedStartsWithoutItsKindAndWatchesItOnceServed runs a
// ConfigMap controller watching Lamps, whose CRD is not installed: it
// reconciles its ConfigMaps at once; once the CRD is installed, the
// requests of served are queued, and Lamps' events map to requests.
func TestWhenServedStartsWithoutItsKindAndWatchesItOnceServed(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "primary", nil)
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	var (
		mu         sync.Mutex
		reconciled = map[string]bool{} // by name; mu guards it
		served     atomic.Int64
	)
	lamps := framework.WithSelection(framework.Map(func(_ context.Context, obj object.Object) []reconcile.Request {
		return []reconcile.Request{{Namespace: ns, Name: "from-" + obj.GetName()}}
	}), informers.Selection{Kind: lamp})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "lamps", framework.ControllerOptions{}).
		Watches(framework.WhenServed(lamps, func() []reconcile.Request {
			served.Add(1)
			return []reconcile.Request{{Namespace: ns, Name: "served"}}
		})).
		CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			reconciled[req.Name] = true
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	was := func(name string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return reconciled[name]
		}
	}
	testenv.Eventually(t, "the controller reconciles its ConfigMap while Lamps are not served", was("primary"))
	if n := served.Load(); n != 0 {
		t.Fatalf("served was called %d times before the kind was served", n)
	}

	crd, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lampCRD())
	if err != nil {
		t.Fatal(err)
	}
	if err := plane.Environment().InstallCRDs(t.Context(), envtest.CRDOptions{Objects: []runtime.Object{&unstructured.Unstructured{Object: crd}}}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(admin)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	t.Cleanup(func() {
		if err := crds.Delete(context.WithoutCancel(t.Context()), lampCRD().Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	testenv.Eventually(t, "the requests of served are queued once Lamps are served", was("served"))
	l := &unstructured.Unstructured{}
	l.SetGroupVersionKind(lamp)
	l.SetName("first")
	if _, err := dyn.Resource(lamp.GroupVersion().WithResource("lamps")).Namespace(ns).Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a Lamp's event reconciles what it maps to", was("from-first"))
	if n := served.Load(); n != 1 {
		t.Errorf("served was called %d times, want once", n)
	}
}
