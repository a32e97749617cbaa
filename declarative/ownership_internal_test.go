package declarative

import (
	"cmp"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/reconcile"
)

func TestPreviousParent(t *testing.T) {
	d := &Declarative[*unstructured.Unstructured]{
		opts:      Options{FieldManager: "m"},
		parentGVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Site"},
	}
	parent := &unstructured.Unstructured{}
	parent.SetNamespace("ns")
	parent.SetName("site")
	parent.SetUID("new")
	controlled := func(ns, apiVersion, kind, name, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName("child")
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}})
		return u
	}
	linked := func(uid, parentKey string, deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("other")
		u.SetName("child")
		u.SetLabels(map[string]string{ParentUIDLabel: uid, ManagerLabel: "m"})
		u.SetAnnotations(map[string]string{ParentAnnotation: parentKey})
		if deleting {
			u.SetDeletionTimestamp(new(metav1.Now()))
		}
		return u
	}
	for _, tc := range []struct {
		name string
		live *unstructured.Unstructured
		want bool
	}{
		{"controlled by a deleted parent of the same name", controlled("ns", "example.com/v1", "Site", "site", "old"), true},
		{"controlled by a deleted parent of the same name, another version", controlled("ns", "example.com/v2", "Site", "site", "old"), true},
		{"controlled by this parent", controlled("ns", "example.com/v1", "Site", "site", "new"), false},
		{"controlled by another parent", controlled("ns", "example.com/v1", "Site", "other", "old"), false},
		{"controlled by a kind of another group", controlled("ns", "other.com/v1", "Site", "site", "old"), false},
		{"controlled by another kind", controlled("ns", "example.com/v1", "Page", "site", "old"), false},
		{"controlled by a parent of that name in its own namespace", controlled("other", "example.com/v1", "Site", "site", "old"), false},
		{"linked to a deleted parent of the same name, being deleted", linked("old", "ns/site", true), true},
		{"linked to a deleted parent of the same name, not being deleted", linked("old", "ns/site", false), false},
		{"linked to another parent, being deleted", linked("old", "ns/other", true), false},
		{"linked with no parent UID, being deleted", linked("", "ns/site", true), false},
	} {
		ref := ownerOf(tc.live)
		if _, got := d.previousParent(parent, tc.live, ref, ""); got != tc.want {
			t.Errorf("%s: previousParent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestConflictWatch(t *testing.T) {
	var w conflictWatch
	a, b := reconcile.Request{Namespace: "ns", Name: "a"}, reconcile.Request{Namespace: "ns", Name: "b"}
	w.set(a, []string{"ConfigMap/ns/x", "ConfigMap/ns/y"})
	w.set(b, []string{"ConfigMap/ns/y"})
	got := w.parentsOf("ConfigMap/ns/y")
	slices.SortFunc(got, func(p, q reconcile.Request) int { return cmp.Compare(p.String(), q.String()) })
	if !slices.Equal(got, []reconcile.Request{a, b}) {
		t.Errorf("parentsOf(y) = %v, want [a b]", got)
	}
	if got := w.parentsOf("ConfigMap/ns/z"); len(got) != 0 {
		t.Errorf("parentsOf(z) = %v, want none", got)
	}
	w.set(a, nil) // a reconcile without conflicts
	if got := w.parentsOf("ConfigMap/ns/x"); len(got) != 0 {
		t.Errorf("parentsOf(x) after a's conflicts ended = %v, want none", got)
	}
	w.set(b, nil)
	if len(w.byParent) != 0 {
		t.Errorf("%d parents remembered after every conflict ended, want 0", len(w.byParent))
	}
}
