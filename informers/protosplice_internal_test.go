package informers

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// managedPod is a Pod whose metadata has managedFields between other
// fields, as the API server sends them.
func managedPod() *corev1.Pod {
	pod := replica(7)
	pod.ResourceVersion = "77"
	pod.Finalizers = []string{"example.com/keep"}
	pod.Annotations = map[string]string{"a": "b"}
	at := metav1.NewTime(time.Unix(1700000000, 0))
	pod.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: bytes.Repeat([]byte("x"), 300)}, Subresource: "status"},
	}
	return pod
}

func TestProtoCodecsLeaveManagedFieldsOutWhenTheCacheDropsThem(t *testing.T) {
	events := append(testEvents(), watch.Event{Type: watch.Modified, Object: managedPod()})
	stream := watchStream(t, events...)
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	want := decodeAll(t, base, stream)
	got := decodeAll(t, newProtoCodecs(base, clientgoscheme.Scheme, true), stream)
	if len(got) != len(want) {
		t.Fatalf("decoded %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if m, err := meta.Accessor(want[i].Object); err == nil {
			m.SetManagedFields(nil) // what the cache's transform does
		}
		if got[i].Type != want[i].Type || !apiequality.Semantic.DeepEqual(got[i].Object, want[i].Object) {
			t.Errorf("event %d: got %s %#v\nwant %s %#v", i, got[i].Type, got[i].Object, want[i].Type, want[i].Object)
		}
	}
	if pod := got[len(got)-1].Object.(*corev1.Pod); pod.ManagedFields != nil || pod.Annotations["a"] != "b" || pod.Finalizers[0] != "example.com/keep" {
		t.Errorf("decoded pod: managedFields %v, annotations %v, finalizers %v; want none, a=b, example.com/keep", pod.ManagedFields, pod.Annotations, pod.Finalizers)
	}
}

func TestWithoutManagedFieldsLeavesOtherBytesAlone(t *testing.T) {
	pod, err := managedPod().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	plain := replica(1)
	plainBytes, _ := plain.Marshal()
	nonMinimalTag := append([]byte{0x8a, 0x00}, pod[1:]...) // field 1 with its tag in two bytes
	for name, in := range map[string][]byte{
		"empty":                {},
		"no managedFields":     plainBytes,
		"truncated":            pod[:len(pod)/2],
		"metadata not a bytes": {0x08, 0x01},
		"metadata twice":       append(bytes.Clone(pod), pod...),
		"tag in two bytes":     nonMinimalTag,
		"broken metadata":      {0x0a, 0x02, 0x8a, 0x01}, // managedFields' tag, then no length
	} {
		before := bytes.Clone(in)
		if out, ok := withoutManagedFields(in); ok {
			t.Errorf("%s: spliced to %d bytes, want the bytes left as they are", name, len(*out))
		}
		if !bytes.Equal(in, before) {
			t.Errorf("%s: the input changed", name)
		}
	}
}

func TestProtoCodecsDecodeUnexpectedBytesAsTheStandardDecoder(t *testing.T) {
	// A Pod whose metadata's tag is not in one byte decodes as it always
	// did, managedFields and all (the transform drops them later).
	raw, err := managedPod().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw = append([]byte{0x8a, 0x00}, raw[1:]...)
	unk := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw}
	env, _ := unk.Marshal()
	data := append(bytes.Clone(protobufPrefix), env...)
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	codecs := newProtoCodecs(base, clientgoscheme.Scheme, true)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	got, _, err := codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion).Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := runtime.SerializerInfoForMediaType(base.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	want, _, err := base.DecoderToVersion(std.Serializer, corev1.SchemeGroupVersion).Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) || len(got.(*corev1.Pod).ManagedFields) != 2 {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

// A decoded object owns its bytes: neither the pooled buffer the
// managedFields were spliced out in nor the stream it came from is
// referenced by it, so reusing either (as the next event does) cannot
// change an object the cache already holds.
func TestASplicedObjectOwnsItsBytes(t *testing.T) {
	pod := managedPod()
	pod.Labels = map[string]string{"app": "web"}
	stream := watchStream(t, watch.Event{Type: watch.Added, Object: pod})
	codecs := newProtoCodecs(serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion(), clientgoscheme.Scheme, true)
	got := decodeAll(t, codecs, stream)
	if len(got) != 1 {
		t.Fatalf("decoded %d events, want 1", len(got))
	}
	// A deep copy would share the strings' bytes: keep them as JSON.
	want, err := json.Marshal(got[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite every byte the decoder may have read from: the stream and
	// the pooled buffers (a pool may hand back any of them, or none).
	for i := range stream {
		stream[i] = 0xAA
	}
	for range 8 {
		b := spliceBuffers.Get().(*[]byte)
		full := (*b)[:cap(*b)]
		for i := range full {
			full[i] = 0xAA
		}
		defer spliceBuffers.Put(b)
	}
	if after, err := json.Marshal(got[0].Object); err != nil || !bytes.Equal(after, want) {
		t.Fatalf("the decoded Pod changed when the bytes it was decoded from were overwritten (%v):\n got %s\nwant %s", err, after, want)
	}
}
