package framework_test

import (
	"context"
	"strings"
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

func lampCRD() *apiextensionsv1.CustomResourceDefinition { return crdOf(lamp, "lamps") }

// crdOf returns a CRD of the namespaced kind gvk, of resource plural, that
// takes any object.
func crdOf(gvk schema.GroupVersionKind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, ListKind: gvk.Kind + "List", Plural: plural, Singular: strings.ToLower(gvk.Kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
}

// installCRD installs crd on the shared control plane, and deletes it when
// the test ends.
func installCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := plane.Environment().InstallCRDs(t.Context(), envtest.CRDOptions{Objects: []runtime.Object{&unstructured.Unstructured{Object: m}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCRD(context.WithoutCancel(t.Context()), t, crd.Name) })
}

// deleteCRD deletes the CRD name, if it exists.
func deleteCRD(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	crds := dynamic.NewForConfigOrDie(plane.Config(t)).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
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
		Watches(framework.WhenServed(lamps, func(serving bool) []reconcile.Request {
			if !serving {
				t.Error("served(false) was called, though Lamps stayed served")
				return nil
			}
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

// bulb is a kind whose CRD TestWhenServedLetsGoOfAKindNoLongerServed
// deletes and installs again while a controller watching it runs.
var bulb = schema.GroupVersionKind{Group: "served.framework.converge.dev", Version: "v1", Kind: "Bulb"}

// TestWhenServedLetsGoOfAKindNoLongerServed runs a ConfigMap controller
// watching Bulbs, whose CRD is installed at its start: once the CRD is
// deleted, served(false) is called, the informer of Bulbs stops (the
// cache is healthy again), and once the CRD is installed again the kind is
// watched again, as a kind missing at the start is.
func TestWhenServedLetsGoOfAKindNoLongerServed(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	installCRD(t, crdOf(bulb, "bulbs"))
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	var (
		mu         sync.Mutex
		reconciled = map[string]int{} // by name; mu guards it
		calls      []bool             // of served, in order; mu guards it
	)
	bulbs := framework.WithSelection(framework.Map(func(_ context.Context, obj object.Object) []reconcile.Request {
		return []reconcile.Request{{Namespace: ns, Name: "from-" + obj.GetName()}}
	}), informers.Selection{Kind: bulb})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "bulbs", framework.ControllerOptions{}).
		Watches(framework.WhenServed(bulbs, func(serving bool) []reconcile.Request {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, serving)
			if serving {
				return []reconcile.Request{{Namespace: ns, Name: "served"}}
			}
			return []reconcile.Request{{Namespace: ns, Name: "gone"}}
		})).
		CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			reconciled[req.Name]++
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	times := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return reconciled[name]
	}
	served := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), calls...)
	}
	dyn := dynamic.NewForConfigOrDie(admin)
	create := func(name string) {
		t.Helper()
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(bulb)
		b.SetName(name)
		if _, err := dyn.Resource(bulb.GroupVersion().WithResource("bulbs")).Namespace(ns).Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "served(true) at the start", func() bool { return times("served") == 1 })
	create("first")
	testenv.Eventually(t, "a Bulb's event reconciles what it maps to", func() bool { return times("from-first") > 0 })

	deleteCRD(t.Context(), t, crdOf(bulb, "bulbs").Name)
	testenv.Eventually(t, "served(false) once the CRD is gone, and its requests queued", func() bool { return times("gone") == 1 })
	testenv.Eventually(t, "the cache is healthy, the Bulbs' informer stopped", func() bool { return mgr.Cache().Health() == nil })
	if got := served(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("served was called with %v, want true then false", got)
	}

	installCRD(t, crdOf(bulb, "bulbs"))
	testenv.Eventually(t, "served(true) once the CRD is back", func() bool { return times("served") == 2 })
	create("second")
	testenv.Eventually(t, "a Bulb's event reconciles what it maps to again", func() bool { return times("from-second") > 0 })
	if got := served(); len(got) != 3 {
		t.Errorf("served was called with %v, want true, false, true", got)
	}
}
