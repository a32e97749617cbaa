package informers

import (
	"bytes"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// watchStream encodes events as an API server sends a protobuf watch.
func watchStream(t testing.TB, events ...watch.Event) []byte {
	t.Helper()
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var buf bytes.Buffer
	frames := info.StreamSerializer.Framer.NewFrameWriter(&buf)
	enc := codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	for _, ev := range events {
		var obj bytes.Buffer
		if err := enc.Encode(ev.Object, &obj); err != nil {
			t.Fatal(err)
		}
		out := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: obj.Bytes()}}
		var frame bytes.Buffer
		if err := info.StreamSerializer.Encode(out, &frame); err != nil {
			t.Fatal(err)
		}
		if _, err := frames.Write(frame.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// decodeAll decodes a watch stream as client-go's REST client does, with
// the codecs ns.
func decodeAll(t testing.TB, ns runtime.NegotiatedSerializer, stream []byte) []watch.Event {
	t.Helper()
	neg := runtime.NewClientNegotiator(ns, corev1.SchemeGroupVersion)
	objDecoder, streamSerializer, framer, err := neg.StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), streamSerializer), objDecoder)
	var out []watch.Event
	for {
		typ, obj, err := dec.Decode()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

func testEvents() []watch.Event {
	pod := replica(1)
	pod.ResourceVersion = "42"
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}}
	gone := replica(2)
	gone.ResourceVersion = "43"
	return []watch.Event{
		{Type: watch.Added, Object: pod},
		{Type: watch.Modified, Object: replica(3)},
		{Type: watch.Deleted, Object: gone},
		{Type: watch.Bookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "44", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}},
		{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}},
	}
}

func TestProtoCodecsDecodeAsClientGoDoes(t *testing.T) {
	stream := watchStream(t, testEvents()...)
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	want := decodeAll(t, base, stream)
	got := decodeAll(t, newProtoCodecs(base, clientgoscheme.Scheme, false), stream)
	if len(got) != len(want) {
		t.Fatalf("decoded %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Type != want[i].Type || reflect.TypeOf(got[i].Object) != reflect.TypeOf(want[i].Object) ||
			!apiequality.Semantic.DeepEqual(got[i].Object, want[i].Object) {
			t.Errorf("event %d: got %s %#v\nwant %s %#v", i, got[i].Type, got[i].Object, want[i].Type, want[i].Object)
		}
	}
}

func TestProtoCodecsDecodedObjectsOwnTheirMemory(t *testing.T) {
	stream := watchStream(t, testEvents()[:2]...)
	codecs := newProtoCodecs(serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion(), clientgoscheme.Scheme, false)
	events := decodeAll(t, codecs, stream)
	for i := range stream {
		stream[i] = 0 // what reading the next frames into the buffer does
	}
	pod := events[0].Object.(*corev1.Pod)
	if pod.Name != "web-1" || pod.Labels["app"] != "web" || string(pod.ManagedFields[0].FieldsV1.Raw) != `{"f:metadata":{}}` {
		t.Errorf("decoded pod changed with the frame buffer: %s %v %s", pod.Name, pod.Labels, pod.ManagedFields[0].FieldsV1.Raw)
	}
}

func TestProtoCodecsFallBackOnOtherInput(t *testing.T) {
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	codecs := newProtoCodecs(base, clientgoscheme.Scheme, false)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	dec := codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
	for _, in := range [][]byte{nil, []byte("k8s"), []byte("{}"), append(bytes.Clone(protobufPrefix), 0x0a, 0xff)} {
		if _, _, err := dec.Decode(in, nil, nil); err == nil {
			t.Errorf("Decode(%q) succeeded, want the standard decoder's error", in)
		}
	}
	// A kind the scheme does not know fails as before.
	var buf bytes.Buffer
	unk := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "example.com/v1", Kind: "Gadget"}, Raw: []byte{}}
	data, _ := unk.Marshal()
	buf.Write(protobufPrefix)
	buf.Write(data)
	if _, _, err := dec.Decode(buf.Bytes(), nil, nil); !runtime.IsNotRegisteredError(err) {
		t.Errorf("unknown kind: got %v, want a not-registered error", err)
	}
}

// BenchmarkDecodePodEvent decodes protobuf watch events of a Pod with a
// realistic spec, the standard way and in place; ns/op is per event.
func BenchmarkDecodePodEvent(b *testing.B) {
	pod := replica(1)
	for i := range 20 {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "VARIABLE_" + strconv.Itoa(i), Value: strings.Repeat("v", 40)})
	}
	events := make([]watch.Event, 100)
	for i := range events {
		events[i] = watch.Event{Type: watch.Modified, Object: pod}
	}
	stream := watchStream(b, events...)
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"client-go", base}, {"in-place", newProtoCodecs(base, clientgoscheme.Scheme, false)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decodeAll(b, c.ns, stream)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}
