package controllerutil_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/object"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func deployment(ns, name, uid string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}
}

func TestSetControllerReference(t *testing.T) {
	s := newScheme(t)
	a, b := deployment("ns", "a", "uid-a"), deployment("ns", "b", "uid-b")
	child := configMap()

	if err := controllerutil.SetControllerReference(a, child, s); err != nil {
		t.Fatal(err)
	}
	refs := child.GetOwnerReferences()
	if len(refs) != 1 || refs[0].Kind != "Deployment" || refs[0].APIVersion != "apps/v1" || refs[0].UID != "uid-a" ||
		refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		t.Fatalf("owner references = %+v, want one controller reference to Deployment a", refs)
	}
	// Setting it again changes nothing.
	if err := controllerutil.SetControllerReference(a, child, s); err != nil || len(child.GetOwnerReferences()) != 1 {
		t.Fatalf("second set: err %v, refs %+v", err, child.GetOwnerReferences())
	}

	// Another controller is refused, with a typed error naming both.
	err := controllerutil.SetControllerReference(b, child, s)
	var owned *controllerutil.AlreadyOwnedError
	if !errors.As(err, &owned) {
		t.Fatalf("err = %v, want *AlreadyOwnedError", err)
	}
	if owned.Owner.Name != "a" || !strings.Contains(err.Error(), "ns/child is already controlled by Deployment a") {
		t.Errorf("error %q / owner %+v should name the object and its controller a", err, owned.Owner)
	}
	if refs := child.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "a" {
		t.Errorf("refused set changed the references: %+v", refs)
	}

	// A non-controller owner may be added beside the controller.
	if err := controllerutil.SetOwnerReference(b, child, s); err != nil {
		t.Fatal(err)
	}
	if refs := child.GetOwnerReferences(); len(refs) != 2 || refs[1].Name != "b" || refs[1].Controller != nil {
		t.Errorf("after SetOwnerReference(b): %+v", refs)
	}
	// SetOwnerReference on the controller keeps it the controller.
	if err := controllerutil.SetOwnerReference(a, child, s); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(child); ref == nil || ref.Name != "a" {
		t.Errorf("SetOwnerReference(a) dropped a's controller flag: %+v", child.GetOwnerReferences())
	}
	if removed, err := controllerutil.RemoveOwnerReference(a, child, s); err != nil || !removed {
		t.Fatalf("remove a: %v, %v", removed, err)
	}
	if controllerutil.HasControllerReference(child) {
		t.Error("child still has a controller after a was removed")
	}
}

func TestOwnerReferenceRules(t *testing.T) {
	s := newScheme(t)
	for _, tc := range []struct {
		name  string
		owner object.Object
		want  string
	}{
		{"owner in another namespace", deployment("other", "a", "uid-a"), "ns/child: owner Deployment other/a is in another namespace"},
		{"owner never stored", deployment("ns", "a", ""), "has no name or UID"},
		{"owner kind unknown", &unregistered{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "u"}}, "kind of *controllerutil_test.unregistered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := controllerutil.SetControllerReference(tc.owner, configMap(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A cluster-scoped owner (no namespace) may own a namespaced object.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "uid-ns"}}
	if err := controllerutil.SetControllerReference(ns, configMap(), s); err != nil {
		t.Errorf("cluster-scoped owner: %v", err)
	}
}

type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object { c := *u; return &c }

func TestFinalizers(t *testing.T) {
	cm := configMap()
	const f = "example.com/cleanup"
	if controllerutil.HasFinalizer(cm, f) {
		t.Fatal("a new object has the finalizer")
	}
	for i, want := range []bool{true, false} {
		if changed, err := controllerutil.AddFinalizer(cm, f); err != nil || changed != want {
			t.Fatalf("add %d = %v, %v; want %v (add should change the object once)", i+1, changed, err, want)
		}
	}
	cm.Finalizers = append(cm.Finalizers, "other.io/keep", f)
	for i, want := range []bool{true, false} {
		if changed, err := controllerutil.RemoveFinalizer(cm, f); err != nil || changed != want {
			t.Fatalf("remove %d = %v, %v; want %v (remove should change the object once)", i+1, changed, err, want)
		}
	}
	if got := strings.Join(cm.Finalizers, ","); got != "other.io/keep" {
		t.Errorf("finalizers = %q, want only other.io/keep (every copy of ours removed)", got)
	}
}

func TestMergePatch(t *testing.T) {
	orig := configMap()
	orig.ResourceVersion = "7"
	orig.Data = map[string]string{"keep": "1", "drop": "2"}
	mod := orig.DeepCopy()
	mod.Data = map[string]string{"keep": "1", "add": "3"}
	mod.Labels = map[string]string{"team": "web"}

	for _, tc := range []struct {
		lock bool
		want string
	}{
		{false, `{"data":{"add":"3","drop":null},"metadata":{"labels":{"team":"web"}}}`},
		{true, `{"data":{"add":"3","drop":null},"metadata":{"labels":{"team":"web"},"resourceVersion":"7"}}`},
	} {
		b, err := controllerutil.MergePatch(orig, mod, tc.lock)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("lock=%v: patch %s, want %s", tc.lock, gb, wb)
		}
	}
}
