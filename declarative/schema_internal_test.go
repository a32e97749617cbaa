package declarative

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/spec3"
)

// TestSameAfterApply decides from client-go's schemas of the built-in kinds
// (what a server publishing no OpenAPI gets), which are the API server's.
func TestSameAfterApply(t *testing.T) {
	s := &schemas{builtin: func() managedfields.TypeConverter { return applyconfigurations.NewTypeConverter(scheme.Scheme) }}
	const service = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":%s}`
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":%s}`
	for _, tc := range []struct {
		name, format, live, want string
		same                     bool
	}{
		{"equal", service, `{"selector":{"app":"a"}}`, `{"selector":{"app":"a"}}`, true},
		{"a key added to an atomic map", service, `{"selector":{"app":"a","extra":"x"}}`, `{"selector":{"app":"a"}}`, false},
		{"a field defaulted inside an associative list element", service,
			`{"ports":[{"port":80,"protocol":"TCP","targetPort":80}]}`, `{"ports":[{"port":80}]}`, true},
		{"another manager's element of an associative list", service,
			`{"ports":[{"port":80,"protocol":"TCP"},{"port":81,"protocol":"TCP"}]}`, `{"ports":[{"port":80}]}`, true},
		{"a value changed", service, `{"ports":[{"port":80,"protocol":"TCP","targetPort":81}]}`, `{"ports":[{"port":80,"targetPort":80}]}`, false},
		{"a key added to a nested atomic map", pod,
			`{"nodeSelector":{"os":"linux","extra":"x"},"containers":[{"name":"c","image":"i"}]}`, `{"nodeSelector":{"os":"linux"}}`, false},
		{"a field added inside an atomic list element", pod,
			`{"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}]}`, `{"tolerations":[{"key":"k","operator":"Exists"}]}`, false},
		{"an atomic list reordered", pod,
			`{"containers":[{"name":"c","args":["b","a"]}]}`, `{"containers":[{"name":"c","args":["a","b"]}]}`, false},
		{"a field another manager added to a granular struct", pod,
			`{"containers":[{"name":"c","image":"i","imagePullPolicy":"Always"}]}`, `{"containers":[{"name":"c","image":"i"}]}`, true},
		{"a container another manager added", pod,
			`{"containers":[{"name":"side"},{"name":"c","image":"i"}]}`, `{"containers":[{"name":"c","image":"i"}]}`, true},
		{"a missing field", pod, `{"containers":[{"name":"c"}]}`, `{"containers":[{"name":"c","image":"i"}]}`, false},
		{"a custom resource without a schema: maps granular", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":%s}`,
			`{"m":{"a":"1","b":"2"},"l":[1,2]}`, `{"m":{"a":"1"},"l":[1,2]}`, true},
		{"a custom resource without a schema: lists atomic", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":%s}`,
			`{"l":[1,2,3]}`, `{"l":[1,2]}`, false},
	} {
		live := &unstructured.Unstructured{Object: decode(t, fmt.Sprintf(tc.format, tc.live)).(map[string]any)}
		want := &unstructured.Unstructured{Object: decode(t, fmt.Sprintf(tc.format, tc.want)).(map[string]any)}
		if got := s.sameAfterApply(live, want); got != tc.same {
			t.Errorf("%s: sameAfterApply = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// countingRoot publishes, for every group version, a document with no
// schemas, and counts the reads.
type countingRoot struct{ reads int }

func (r *countingRoot) GroupVersions() ([]schema.GroupVersion, error) { return nil, nil }
func (r *countingRoot) GVSpec(schema.GroupVersion) (*spec3.OpenAPI, error) {
	r.reads++
	return &spec3.OpenAPI{Components: &spec3.Components{}}, nil
}
func (r *countingRoot) GVSpecAsMap(schema.GroupVersion) (map[string]any, error) { return nil, nil }

// TestSchemasAreReadAgainAfterTheirTTL: a CRD's schema may change while
// converge runs, so a group version's document is read again once
// schemaTTL has passed, not before.
func TestSchemasAreReadAgainAfterTheirTTL(t *testing.T) {
	root := &countingRoot{}
	now := time.Unix(1000, 0)
	s := &schemas{root: root, now: func() time.Time { return now }}
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	for range 3 {
		if _, err := s.forGV(gv); err != nil {
			t.Fatal(err)
		}
	}
	if root.reads != 1 {
		t.Fatalf("%d reads within the TTL, want 1", root.reads)
	}
	now = now.Add(schemaTTL)
	if _, err := s.forGV(gv); err != nil {
		t.Fatal(err)
	}
	if root.reads != 2 {
		t.Fatalf("%d reads after the TTL, want 2", root.reads)
	}
}
