package declarative

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzNormalize feeds arbitrary JSON objects through the child pipeline:
// conversion, pruning and hashing never panic, a child always contains
// itself (so an unchanged child is never re-applied), and hashing is stable.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","creationTimestamp":null},"data":{"k":"v"}}`))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"c","resources":{}}]}}},"status":{}}`))
	f.Add([]byte(`{"a":[[],{},null,1.5,"x",true]}`))
	f.Add([]byte(`{}`))
	d := &Declarative[*unstructured.Unstructured]{}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		u, err := d.toUnstructured(&unstructured.Unstructured{Object: m})
		if err != nil {
			return // no apiVersion or kind: rejected with an error, as it should be
		}
		h1, err := hashOf(u.Object)
		if err != nil {
			t.Fatalf("hash: %v", err)
		}
		again := runtime.DeepCopyJSON(u.Object)
		dropNulls(again)
		h2, _ := hashOf(again)
		if h1 != h2 {
			t.Errorf("dropping nulls twice changed the hash: %s vs %s", h1, h2)
		}
		if !contains(u.Object, u.Object) {
			t.Errorf("a child does not contain itself: %s", data)
		}
	})
}

// FuzzParentOf maps children with arbitrary parent annotations: it never
// panics and names at most one parent.
func FuzzParentOf(f *testing.F) {
	f.Add("ns/name")
	f.Add("cluster-scoped")
	f.Add("a/b/c")
	f.Add("")
	f.Add("/")
	d := &Declarative[*unstructured.Unstructured]{opts: Options{FieldManager: "m"}}
	f.Fuzz(func(t *testing.T, ref string) {
		child := &unstructured.Unstructured{}
		child.SetLabels(map[string]string{ManagerLabel: "m"})
		child.SetAnnotations(map[string]string{ParentAnnotation: ref})
		if reqs := d.parentOf(child); len(reqs) > 1 {
			t.Errorf("parentOf(%q) = %v, want at most one parent", ref, reqs)
		}
	})
}
