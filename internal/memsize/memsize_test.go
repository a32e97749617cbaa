package memsize_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/memsize"
)

func TestAllocRoundsToSizeClasses(t *testing.T) {
	for _, c := range []struct {
		n        int64
		pointers bool
		want     int64
	}{
		{0, false, 0},
		{5, false, 5},   // tiny allocator: packed
		{5, true, 8},    // holds pointers: a size class
		{17, false, 24}, // the next class
		{33, false, 48},
		{512, true, 512}, // no malloc header up to 512 bytes
		{513, true, 576}, // 513 + the 8-byte header
		{1025, false, 1152},
		{32768, false, 32768},
		{32769, false, 40960}, // whole pages
	} {
		if got := memsize.Alloc(c.n, c.pointers); got != c.want {
			t.Errorf("Alloc(%d, %v) = %d, want %d", c.n, c.pointers, got, c.want)
		}
	}
}

func TestOfKnownShapes(t *testing.T) {
	type pair struct {
		A *int64
		B string
	}
	x := int64(7)
	shared := strings.Repeat("s", 100)
	for _, c := range []struct {
		name string
		v    any
		want int64
	}{
		{"nil", nil, 0},
		{"a pointer to an int", &x, 8},
		{"a string of 100 bytes", strings.Repeat("x", 100), 112},
		{"a pointer to a struct with a pointer and a string", &pair{A: &x, B: strings.Repeat("y", 20)}, 24 + 8 + 24},
		{"a slice counts its capacity", make([]int64, 1, 10), 80},
		{"a slice of strings", []string{strings.Repeat("a", 40), strings.Repeat("b", 40)}, 32 + 48 + 48},
		{"a string reached twice counts once", []string{shared, shared}, 32 + 112},
		{"an empty map", map[string]string{}, 48},
		// header 48, one group of 8+8*32 = 264 -> 288, two values of 100 -> 2*112, keys of 3 bytes tiny.
		{"a small map", map[string]string{"abc": strings.Repeat("v", 100), "def": strings.Repeat("w", 100)}, 48 + 288 + 2*112 + 2*3},
		{"an interface holding a string", []any{strings.Repeat("z", 30)}, 16 + 16 + 32},
		{"an interface holding a bool", []any{true}, 16},
	} {
		if got := memsize.Of(c.v); got != c.want {
			t.Errorf("%s: Of = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestExcludedValuesCostNothing(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "frontend"}
	a := &metav1.ObjectMeta{Name: "a", Labels: labels}
	var s memsize.Sizer
	with := s.Of(a)
	s.Reset()
	s.Exclude(labels)
	without := s.Of(a)
	if want := memsize.Of(labels); with-without != want {
		t.Errorf("excluding the labels saved %d bytes, want the map's %d", with-without, want)
	}
	s.Reset()
	if got := s.Of(a); got != with {
		t.Errorf("after Reset, Of = %d, want %d as before Exclude", got, with)
	}
}

// configMaps decodes n ConfigMaps the way the cache gets them: from their
// protobuf encoding, each string copied out of the bytes.
func configMaps(tb testing.TB, n int) [][]byte {
	tb.Helper()
	out := make([][]byte, n)
	for i := range n {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: "config-" + strconv.Itoa(i), Namespace: "bench", UID: types.UID(fmt.Sprintf("0d3e5c1a-%04d-4f4e-9a57-%012d", i%10000, i)),
				ResourceVersion: strconv.Itoa(100000 + i), Labels: map[string]string{"app": "bench", "shard": strconv.Itoa(i % 16)},
				CreationTimestamp: metav1.Unix(1700000000+int64(i), 0),
			},
			Data: map[string]string{"payload": strings.Repeat(strconv.FormatInt(int64(i), 36), 1024)[:1024], "mode": "fast"},
		}
		b, err := cm.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func pods(tb testing.TB, n int) [][]byte {
	tb.Helper()
	out := make([][]byte, n)
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-" + strconv.Itoa(i), Namespace: "bench", UID: types.UID(fmt.Sprintf("0d3e5c1a-%04d-4f4e-9a57-%012d", i%10000, i)),
				ResourceVersion: strconv.Itoa(100000 + i), Labels: map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
				CreationTimestamp: metav1.Unix(1700000000+int64(i), 0),
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "web", Image: "registry.example/web:1.2.3", Args: []string{"--port=8080", "--verbose"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "INDEX", Value: strconv.Itoa(i)}},
			}}, NodeName: "node-" + strconv.Itoa(i%50)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250)},
		}
		b, err := p.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// heapRatio decodes every encoding with decode and returns the summed
// estimate divided by the growth of the live heap.
func heapRatio(encoded [][]byte, decode func([]byte) any) float64 {
	objs := make([]any, len(encoded))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, b := range encoded {
		objs[i] = decode(b)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var est int64
	for _, o := range objs {
		est += memsize.Of(o)
	}
	measured := int64(after.HeapAlloc) - int64(before.HeapAlloc) - memsize.Alloc(int64(len(objs))*16, true)
	runtime.KeepAlive(objs)
	return float64(est) / float64(measured)
}

func decodeConfigMap(b []byte) any {
	cm := &corev1.ConfigMap{}
	if err := cm.Unmarshal(b); err != nil {
		panic(err)
	}
	return cm
}

func decodePod(b []byte) any {
	p := &corev1.Pod{}
	if err := p.Unmarshal(b); err != nil {
		panic(err)
	}
	return p
}

// asJSON re-encodes protobuf ConfigMaps as JSON, as an unstructured
// informer receives them.
func asJSON(tb testing.TB, encoded [][]byte) [][]byte {
	tb.Helper()
	for i, b := range encoded {
		cm := decodeConfigMap(b).(*corev1.ConfigMap)
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		j, err := json.Marshal(cm)
		if err != nil {
			tb.Fatal(err)
		}
		encoded[i] = j
	}
	return encoded
}

func decodeUnstructured(b []byte) any {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return u
}

// TestEstimateTracksTheHeap decodes 10,000 objects of three shapes and
// compares the estimate with what the live heap grew by. The bounds are
// wide on purpose (the allocator's and collector's own bookkeeping moves
// the heap too); BenchmarkEstimate reports the ratios.
func TestEstimateTracksTheHeap(t *testing.T) {
	for _, c := range []struct {
		name    string
		objects [][]byte
		decode  func([]byte) any
	}{
		{"ConfigMaps", configMaps(t, 10000), decodeConfigMap},
		{"Pods", pods(t, 10000), decodePod},
		{"unstructured ConfigMaps", asJSON(t, configMaps(t, 10000)), decodeUnstructured},
	} {
		if r := heapRatio(c.objects, c.decode); r < 0.8 || r > 1.2 {
			t.Errorf("%s: estimate ÷ heap growth = %.3f, want 0.8 to 1.2", c.name, r)
		} else {
			t.Logf("%s: estimate ÷ heap growth = %.3f", c.name, r)
		}
	}
}

// BenchmarkEstimate reports estimate ÷ heap growth for 10,000 objects of
// each shape (ratio), and the time Of takes per object.
func BenchmarkEstimate(b *testing.B) {
	for _, c := range []struct {
		name    string
		objects [][]byte
		decode  func([]byte) any
	}{
		{"ConfigMap", configMaps(b, 10000), decodeConfigMap},
		{"Pod", pods(b, 10000), decodePod},
		{"UnstructuredConfigMap", asJSON(b, configMaps(b, 10000)), decodeUnstructured},
	} {
		b.Run(c.name, func(b *testing.B) {
			ratio := heapRatio(c.objects, c.decode)
			obj := c.decode(c.objects[0])
			for b.Loop() {
				memsize.Of(obj)
			}
			b.ReportMetric(ratio, "ratio")
		})
	}
}
