package informers

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/memsize"
)

// replica returns the i-th pod of a ReplicaSet: everything but its name and
// UID is what its siblings have, each value decoded into its own memory.
func replica(i int) *corev1.Pod {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("web-%d", i),
			Namespace:       string([]byte("shop")),
			UID:             types.UID(fmt.Sprint("uid-", i)),
			Labels:          map[string]string{"app": "web", "pod-template-hash": "5d4f8"},
			Annotations:     map[string]string{"prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f8", UID: "rs-uid", Controller: new(true)}},
		},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/os": "linux"},
			InitContainers: []corev1.Container{{Name: "init", Resources: *res.DeepCopy()}},
			Containers:     []corev1.Container{{Name: "app", Resources: *res.DeepCopy()}, {Name: "proxy", Resources: *res.DeepCopy()}},
		},
	}
}

func same[M ~map[K]V, K comparable, V any](a, b M) bool {
	return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b)
}

func TestSharerSharesEqualValues(t *testing.T) {
	s := newSharer()
	a, b := replica(1), replica(2)
	s.object(a)
	s.object(b)
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"labels", same(a.Labels, b.Labels)},
		{"annotations", same(a.Annotations, b.Annotations)},
		{"node selector", same(a.Spec.NodeSelector, b.Spec.NodeSelector)},
		{"owner references", &a.OwnerReferences[0] == &b.OwnerReferences[0]},
		{"requests across pods", same(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests)},
		{"requests across containers", same(a.Spec.Containers[0].Resources.Requests, a.Spec.InitContainers[0].Resources.Requests)},
		{"limits", same(a.Spec.Containers[1].Resources.Limits, b.Spec.Containers[1].Resources.Limits)},
		{"requests and limits stay apart", !same(a.Spec.Containers[0].Resources.Requests, a.Spec.Containers[0].Resources.Limits)},
	} {
		if !c.ok {
			t.Errorf("%s: not as expected", c.what)
		}
	}
	if a.Name == b.Name || a.UID == b.UID {
		t.Errorf("names or UIDs merged: %s %s", a.Name, b.Name)
	}
	if got := a.Spec.Containers[0].Resources.Limits.Cpu().String(); got != "1" {
		t.Errorf("shared quantity reads %q, want 1", got)
	}
}

func TestSharerKeepsDifferentValuesApart(t *testing.T) {
	s := newSharer()
	a, b := replica(1), replica(2)
	b.Labels["app"] = "api"
	b.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("536870912") // 512Mi, written another way
	b.OwnerReferences[0].Controller = new(false)
	s.object(a)
	s.object(b)
	if same(a.Labels, b.Labels) || a.Labels["app"] != "web" || b.Labels["app"] != "api" {
		t.Errorf("different labels shared: %v %v", a.Labels, b.Labels)
	}
	if same(a.Spec.Containers[0].Resources.Limits, b.Spec.Containers[0].Resources.Limits) {
		t.Error("limits written differently were shared")
	}
	if &a.OwnerReferences[0] == &b.OwnerReferences[0] {
		t.Error("owner references with different controller flags were shared")
	}
}

func TestSharerSkipsUnstructured(t *testing.T) {
	s := newSharer()
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}}}
	before := fmt.Sprintf("%p", u.Object["metadata"])
	s.object(u)
	if fmt.Sprintf("%p", u.Object["metadata"]) != before {
		t.Error("unstructured object rewritten")
	}
}

func TestSharerTablesStayBounded(t *testing.T) {
	s := newSharer()
	for i := range 3 * maxShared {
		s.object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"i": fmt.Sprint(i)}}})
	}
	if n := len(s.labels.cur) + len(s.labels.old); n > 2*maxShared {
		t.Errorf("label table holds %d values, want at most %d", n, 2*maxShared)
	}
	// A value still in use survives a generation change.
	keep := map[string]string{"app": "kept"}
	s.object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: keep}})
	for i := range maxShared {
		if i%(maxShared/4) == 0 {
			s.object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kept"}}})
		}
		s.object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"j": fmt.Sprint(i)}}})
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kept"}}}
	s.object(cm)
	if !same(cm.Labels, keep) {
		t.Error("a value in use was forgotten across generations")
	}
}

// BenchmarkSharerPod is the cost the sharer adds to storing one pod.
func BenchmarkSharerPod(b *testing.B) {
	s := newSharer()
	pods := make([]*corev1.Pod, 1024)
	for i := range pods {
		pods[i] = replica(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.object(pods[i%len(pods)])
		i++
	}
}

// unshared is p without the values the sharer shares: what a measurement
// of p that excludes them must come to.
func unshared(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Namespace, p.Labels, p.Annotations, p.OwnerReferences = "", nil, nil, nil
	p.Spec.NodeSelector, p.Spec.Overhead = nil, nil
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i].Resources.Requests, cs[i].Resources.Limits = nil, nil
		}
	}
	p.Spec.Resources = &corev1.ResourceRequirements{}
	return p
}

func TestSharerExcludesWhatItShares(t *testing.T) {
	s := newSharer()
	p := replica(1)
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	s.object(p)
	var sz memsize.Sizer
	s.exclude(p, &sz)
	if got, want := sz.Of(p), memsize.Of(unshared(p)); got != want {
		t.Errorf("a shared pod measured without its shared values: %d B, want %d B (the pod without them)", got, want)
	}

	n := &corev1.Node{Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
	}}
	s.object(n)
	sz.Reset()
	s.exclude(n, &sz)
	bare := n.DeepCopy()
	bare.Status.Capacity, bare.Status.Allocatable = nil, nil
	if got, want := sz.Of(n), memsize.Of(bare); got != want {
		t.Errorf("a shared node measured without its shared values: %d B, want %d B", got, want)
	}
}

// SharedBytes is kept as values enter and leave the tables: reading it
// takes no walk and allocates nothing, and it stays near a walk of the
// tables through generation changes.
func TestSharerBytesKeptAsValuesComeAndGo(t *testing.T) {
	s := newSharer()
	walk := func() int64 {
		var sz memsize.Sizer
		s.mu.Lock()
		defer s.mu.Unlock()
		return sz.Of(s.strings.cur) + sz.Of(s.strings.old) + sz.Of(s.labels.cur) + sz.Of(s.labels.old) +
			sz.Of(s.resources.cur) + sz.Of(s.resources.old) + sz.Of(s.ownerships.cur) + sz.Of(s.ownerships.old)
	}
	for i := range 2*maxShared + maxShared/2 {
		p := replica(i)
		p.Namespace = fmt.Sprint("ns-", i%7)
		p.Labels = map[string]string{"app": "web", "pod-template-hash": fmt.Sprint(i % (maxShared + 300))}
		s.object(p)
		if i%1000 == 0 || i == 2*maxShared+maxShared/2-1 {
			got, want := s.bytes(), walk()
			if r := float64(got) / float64(want); r < 0.9 || r > 1.1 {
				t.Fatalf("after %d pods: SharedBytes %d B, a walk of the tables %d B (%.2f×), want within a tenth", i+1, got, want, r)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { s.bytes() }); a != 0 {
		t.Errorf("reading SharedBytes allocates %v times, want none", a)
	}
}
