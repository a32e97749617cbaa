package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// widgets is a custom resource with a status subresource, for the status
// writes.
var widgets = schema.GroupVersionResource{Group: "preconditions.converge.dev", Version: "v1", Resource: "widgets"}

func widgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.preconditions.converge.dev"},
		"spec": map[string]any{
			"group": widgets.Group,
			"names": map[string]any{"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
						"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}}
}

// Every write form a reconcile makes carries the precondition
// WithPreconditions asks for, and the real API server honours each: a
// write of an object changed since it was read fails with a Conflict
// naming the version read; the same write of an unchanged object
// succeeds; and without WithPreconditions the stale write lands (the
// negative control: the condition is what refuses it).
func TestPreconditionsRefuseWritesOfObjectsChangedSinceRead(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)
	if err := plane.Environment().InstallCRDs(t.Context(), envtest.CRDOptions{Objects: []runtime.Object{widgetCRD()}}); err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, cs)
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	widget := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("preconditions.converge.dev/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}

	type form struct {
		name string
		// widget: the object is a Widget (with a status subresource),
		// else a ConfigMap.
		widget bool
		// needsVersion: the server refuses the write without a
		// resourceVersion (an update of a custom resource): it has no
		// unconditional form to compare with.
		needsVersion bool
		// write writes the object named name under ctx, as a reconcile
		// that read read would.
		write func(ctx context.Context, read object.Object, name string) error
	}
	forms := []form{
		{"update without a resourceVersion", false, false, func(ctx context.Context, read object.Object, _ string) error {
			cm := read.(*corev1.ConfigMap).DeepCopy()
			cm.ResourceVersion = "" // an unconditional update, but for the precondition
			cm.Data = map[string]string{"k": "late"}
			return c.Update(ctx, cm)
		}},
		{"JSON merge patch", false, false, func(ctx context.Context, _ object.Object, name string) error {
			return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, types.MergePatchType, []byte(`{"data":{"k":"late"}}`))
		}},
		{"strategic merge patch", false, false, func(ctx context.Context, _ object.Object, name string) error {
			return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, types.StrategicMergePatchType, []byte(`{"data":{"k":"late"}}`))
		}},
		{"JSON patch", false, false, func(ctx context.Context, _ object.Object, name string) error {
			return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, types.JSONPatchType, []byte(`[{"op":"add","path":"/data/k","value":"late"}]`))
		}},
		{"server-side apply", false, false, func(ctx context.Context, _ object.Object, name string) error {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"namespace": ns, "name": name}, "data": map[string]any{"k": "late"}}}
			_, err := c.Apply(ctx, u, client.ForceOwnership())
			return err
		}},
		{"delete", false, false, func(ctx context.Context, _ object.Object, name string) error {
			return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}},
		{"status update", true, true, func(ctx context.Context, read object.Object, _ string) error {
			u := read.(*unstructured.Unstructured).DeepCopy()
			u.SetResourceVersion("")
			u.Object["status"] = map[string]any{"k": "late"}
			return c.Status().Update(ctx, u)
		}},
		{"status merge patch", true, false, func(ctx context.Context, _ object.Object, name string) error {
			return c.Status().Patch(ctx, widget(name), types.MergePatchType, []byte(`{"status":{"k":"late"}}`))
		}},
		{"status apply", true, false, func(ctx context.Context, _ object.Object, name string) error {
			u := widget(name)
			u.Object["status"] = map[string]any{"k": "late"}
			_, err := c.Status().Apply(ctx, u, client.ForceOwnership())
			return err
		}},
	}
	// create makes the object and returns it as the client reads it.
	create := func(t *testing.T, f form, name string) object.Object {
		t.Helper()
		if f.widget {
			u := widget(name)
			u.Object["spec"] = map[string]any{"k": "v"}
			if _, err := dyn.Resource(widgets).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return widget(name)
		}
		testenv.CreateConfigMap(t, cs, ns, name, map[string]string{"k": "v"})
		return &corev1.ConfigMap{}
	}
	// change changes the object as another process would.
	change := func(t *testing.T, f form, name string) {
		t.Helper()
		var err error
		if f.widget {
			_, err = dyn.Resource(widgets).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"changed":"yes"}}}`), metav1.PatchOptions{})
		} else {
			_, err = cs.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"changed":"yes"}}}`), metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range forms {
		for _, tc := range []struct {
			name           string
			preconditioned bool
			changed        bool
			wantConflict   bool
		}{
			{"changed since read", true, true, true},
			{"unchanged since read", true, false, false},
			{"without preconditions, changed since read (negative control)", false, true, false},
		} {
			if !tc.preconditioned && f.needsVersion {
				continue
			}
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				name := fmt.Sprintf("obj-%d-%d", i, len(tc.name))
				read := create(t, f, name)
				ctx := t.Context()
				if tc.preconditioned {
					ctx = client.WithPreconditions(ctx)
				}
				// The reconcile reads the object (from the cache), then
				// another process may change it, then the reconcile writes.
				cachedGet(t, ctx, c, types.NamespacedName{Namespace: ns, Name: name}, read)
				rv := read.GetResourceVersion()
				if tc.changed {
					change(t, f, name)
				}
				err := f.write(ctx, read, name)
				switch {
				case tc.wantConflict && !apierrors.IsConflict(err):
					t.Fatalf("write of an object changed since it was read at %s: %v, want a Conflict", rv, err)
				case tc.wantConflict && !strings.Contains(err.Error(), "changed since it was read at resourceVersion "+rv):
					t.Errorf("the conflict does not name the version read (%s): %v", rv, err)
				case !tc.wantConflict && err != nil:
					t.Fatalf("write: %v, want it accepted", err)
				}
			})
		}
	}
}

// cachedGet reads key from c's cache into obj under ctx, once the cache
// shows it.
func cachedGet(t *testing.T, ctx context.Context, c *client.Client, key types.NamespacedName, obj object.Object) {
	t.Helper()
	var err error
	testenv.Eventually(t, "the cache shows "+key.String(), func() bool {
		err = c.Get(ctx, key, obj)
		return !apierrors.IsNotFound(err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A reconcile's own writes move the version its next write is conditional
// on: a second write of an object it wrote is not refused by the first.
func TestPreconditionsFollowTheContextsOwnWrites(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "cm", nil)
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	ctx := client.WithPreconditions(t.Context())
	var cm corev1.ConfigMap
	cachedGet(t, ctx, c, types.NamespacedName{Namespace: ns, Name: "cm"}, &cm)
	target := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
	}
	for i := range 3 {
		if err := c.Patch(ctx, target(), types.MergePatchType, fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)); err != nil {
			t.Fatalf("write %d of an object this context wrote: %v", i, err)
		}
	}
	// An older read (a cache behind the context's own write) does not
	// move the version back.
	client.NoteRead(ctx, schema.GroupKind{Kind: "ConfigMap"}, &cm)
	if err := c.Patch(ctx, target(), types.MergePatchType, []byte(`{"data":{"n":"last"}}`)); err != nil {
		t.Fatalf("write after an older read was noted: %v", err)
	}
}
