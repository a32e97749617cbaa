package informers

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/internal/memsize"
)

func compactPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-1", UID: "0c2d6a4e-7d1b-4f0e-9a51-1f3e8d6c2b7a", ResourceVersion: "4711", Generation: 3,
			Labels:          map[string]string{"app": "web", "tier": "front"},
			Annotations:     map[string]string{"note": strings.Repeat("x", 40)},
			Finalizers:      []string{"example.com/hold"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u-rs", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/web:1.2.3", Args: []string{strings.Repeat("--flag=value ", 60)}}}},
	}
}

func newTestCodec(t *testing.T, obj runtime.Object, o CompactOptions) *compactCodec {
	t.Helper()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return newCompactCodec(u.GroupVersionKind(), Unstructured, nil, o, newSharer())
	}
	return newCompactCodec(schema.GroupVersionKind{Version: "v1", Kind: "X"}, Typed, reflect.TypeOf(obj), o, newSharer())
}

// A compact record decodes to an object equal to the one stored, whatever
// the encoding and whether compressed, and holds the metadata the cache
// reads without decoding.
func TestCompactRoundTrip(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"namespace": "ns", "name": "w", "uid": "u-w", "resourceVersion": "9",
			"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"a": "b"}},
		"spec": map[string]any{"replicas": int64(3), "ratio": 0.5, "text": strings.Repeat("abc", 300), "list": []any{"x", int64(1)}},
	}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "u-cm", ResourceVersion: "1"},
		Data: map[string]string{"k": "v"}}
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		o    CompactOptions
		// compressed says whether the body should be compressed.
		compressed bool
	}{
		{"pod protobuf compressed", compactPod(), CompactOptions{}, true},
		{"pod protobuf as is", compactPod(), CompactOptions{DisableCompression: true}, false},
		{"small configmap not compressed", cm, CompactOptions{}, false},
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "u-d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}, CompactOptions{}, false},
		{"unstructured json compressed", u, CompactOptions{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.obj.DeepCopyObject()
			c := newTestCodec(t, tc.obj, tc.o)
			r, kept, err := c.encode(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(kept, want) {
				t.Errorf("the object encoded changed:\n got %#v\nwant %#v", kept, want)
			}
			if r.compressed != tc.compressed {
				t.Errorf("compressed = %v, want %v (body %d B)", r.compressed, tc.compressed, len(r.body))
			}
			got, err := r.decode()
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("decoded:\n got %#v\nwant %#v", got, want)
			}
			m := want.(metav1.Object)
			if r.GetNamespace() != m.GetNamespace() || r.GetName() != m.GetName() || r.GetUID() != m.GetUID() ||
				r.GetResourceVersion() != m.GetResourceVersion() || !reflect.DeepEqual(r.GetLabels(), nilIfEmpty(m.GetLabels())) ||
				r.GetGeneration() != m.GetGeneration() || !reflect.DeepEqual(r.GetFinalizers(), m.GetFinalizers()) ||
				!equality.Semantic.DeepEqual(r.GetOwnerReferences(), m.GetOwnerReferences()) {
				t.Errorf("record metadata %s %s %s %s %v %v, want those of %#v", r.GetNamespace(), r.GetName(), r.GetUID(), r.GetResourceVersion(),
					r.GetLabels(), r.GetOwnerReferences(), m)
			}
			if again, _, _ := c.encode(r); again != r {
				t.Errorf("a record transformed again became another record")
			}
		})
	}
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Objects decoded from a record own their maps and slices: a reader that
// changes one changes neither the record nor the next object decoded.
func TestCompactDecodedObjectsOwnTheirMemory(t *testing.T) {
	c := newTestCodec(t, compactPod(), CompactOptions{Decoded: -1})
	r, kept, err := c.encode(compactPod())
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{kept, mustDecode(t, r)} {
		p := obj.(*corev1.Pod)
		p.Labels["app"] = "changed"
		p.OwnerReferences[0].Name = "changed"
		*p.OwnerReferences[0].Controller = false
		p.Spec.Containers[0].Image = "changed"
	}
	if r.GetLabels()["app"] != "web" || r.GetOwnerReferences()[0].Name != "web" || !*r.GetOwnerReferences()[0].Controller {
		t.Errorf("the record changed with the objects decoded from it: labels %v, owners %v", r.GetLabels(), r.GetOwnerReferences())
	}
	if got, want := mustDecode(t, r), compactPod(); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("decoded after a reader changed a decoded object:\n got %#v\nwant %#v", got, want)
	}
}

func mustDecode(t *testing.T, r *compactObject) runtime.Object {
	t.Helper()
	obj, err := r.decode()
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// Setters of a record panic: records are read-only.
func TestCompactRecordIsReadOnly(t *testing.T) {
	c := newTestCodec(t, compactPod(), CompactOptions{})
	r, _, err := c.encode(compactPod())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != errReadOnly {
			t.Errorf("SetLabels on a record: panic %v, want %q", p, errReadOnly)
		}
	}()
	r.SetLabels(nil)
}

// The cache of decoded objects holds at most about its size, keeps the
// objects read since the hand last passed, and lets go of the others.
func TestDecodedCacheEvictsTheUnused(t *testing.T) {
	d := newDecodedCache(4) // one shard of 4
	recs := make([]*compactObject, 6)
	for i := range recs {
		recs[i] = &compactObject{}
	}
	obj := &corev1.ConfigMap{}
	for _, r := range recs[:4] {
		d.put(r, obj)
	}
	d.get(recs[0]) // used: survives the next two puts
	d.put(recs[4], obj)
	d.put(recs[5], obj)
	if n := d.len(); n != 4 {
		t.Errorf("holds %d, want 4", n)
	}
	for i, want := range []bool{true, false, false, true, true, true} {
		if _, ok := d.get(recs[i]); ok != want {
			t.Errorf("record %d kept = %v, want %v", i, ok, want)
		}
	}
}

// A record's size is what a walk of it finds, without its codec and the
// values it shares.
func TestCompactRecordHeapBytes(t *testing.T) {
	c := newTestCodec(t, compactPod(), CompactOptions{})
	r, _, err := c.encode(compactPod())
	if err != nil {
		t.Fatal(err)
	}
	var sz memsize.Sizer
	sz.Exclude(r.codec)
	sz.Exclude(r.namespace)
	sz.Exclude(r.labels)
	sz.Exclude(r.owners)
	if got, want := r.heapBytes(), sz.Of(r); got != want {
		t.Errorf("heapBytes = %d, a walk finds %d", got, want)
	}
}
