package informers

import (
	"bytes"
	"errors"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Decoding a protobuf watch event the standard way copies the object's bytes
// twice before decoding them: once into the event's RawExtension and once
// into the runtime.Unknown envelope around the object. For a Pod that is
// 10 KB of garbage per event, a third of all the decoding allocates. The
// codecs below read the event and the envelope in place instead, and decode
// the object straight from the bytes of the frame.
//
// This is safe because client-go's watch decoder decodes each event's object
// before it reads the next frame into the same buffer, and generated
// Unmarshal methods copy every string and byte slice they keep. Anything
// unexpected (another encoding, a malformed frame, a type without Unmarshal)
// goes to the standard decoders, which then do what they always did.

// protoCodecs is the NegotiatedSerializer of the cache's protobuf REST
// clients: the scheme's codecs, without conversion, with the protobuf watch
// stream decoded in place.
type protoCodecs struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newProtoCodecs(base runtime.NegotiatedSerializer, scheme *runtime.Scheme, dropManagedFields bool) protoCodecs {
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeProtobuf || info.StreamSerializer == nil {
			continue
		}
		stream := *info.StreamSerializer
		stream.Serializer = eventSerializer{stream.Serializer}
		info.StreamSerializer = &stream
		info.Serializer = &objectSerializer{Serializer: info.Serializer, scheme: scheme, dropManagedFields: dropManagedFields}
		infos[i] = info
	}
	return protoCodecs{NegotiatedSerializer: base, infos: infos}
}

func (c protoCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }

// DecoderToVersion returns the in-place object decoder as it is: it already
// leaves objects without a kind, as the decoder without conversion does.
func (c protoCodecs) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	if o, ok := d.(*objectSerializer); ok {
		return o
	}
	return c.NegotiatedSerializer.DecoderToVersion(d, gv)
}

// eventSerializer decodes a watch event frame into *metav1.WatchEvent with
// Object.Raw pointing into the frame.
type eventSerializer struct{ runtime.Serializer }

func (s eventSerializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok || !readEvent(data, ev) {
		return s.Serializer.Decode(data, gvk, into)
	}
	return ev, &schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: "WatchEvent"}, nil
}

// readEvent reads a WatchEvent message: type = 1, object = 2 (a
// RawExtension, whose raw = 1).
func readEvent(data []byte, ev *metav1.WatchEvent) bool {
	*ev = metav1.WatchEvent{}
	for len(data) > 0 {
		field, value, rest, ok := nextField(data)
		if !ok {
			return false
		}
		switch field {
		case 1:
			ev.Type = eventType(value)
		case 2:
			raw, ok := bytesField(value, 1)
			if !ok {
				return false
			}
			ev.Object.Raw = raw
		}
		data = rest
	}
	return true
}

// eventType returns the event type without allocating for the usual ones.
func eventType(b []byte) string {
	for _, t := range [...]watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}

// protobufPrefix starts every Kubernetes protobuf object: "k8s" and a zero.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// objectSerializer decodes an object from its runtime.Unknown envelope
// without copying the object's bytes out of the envelope.
type objectSerializer struct {
	runtime.Serializer
	scheme *runtime.Scheme
	// dropManagedFields leaves an object's managedFields out of the bytes
	// before they are decoded (see withoutManagedFields).
	dropManagedFields bool
	// last is the kind of the last object decoded with its apiVersion and
	// kind as sent, so that a stream of one kind parses no kind strings.
	last atomic.Pointer[wireKind]
}

type wireKind struct {
	apiVersion, kind string
	gvk              schema.GroupVersionKind
}

var errNotInPlace = errors.New("informers: object needs the standard decoder")

func (s *objectSerializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		if obj, kind, err := s.decode(data); err == nil {
			return obj, kind, nil
		}
	}
	obj, kind, err := s.Serializer.Decode(data, gvk, into)
	if obj != nil { // as runtime.WithoutVersionDecoder does
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return obj, kind, err
}

func (s *objectSerializer) decode(data []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return nil, nil, errNotInPlace
	}
	data = data[len(protobufPrefix):]
	var typeMeta, raw []byte
	for len(data) > 0 {
		field, value, rest, ok := nextField(data)
		if !ok {
			return nil, nil, errNotInPlace
		}
		switch field {
		case 1:
			typeMeta = value
		case 2:
			raw = value
		case 3, 4: // contentEncoding, contentType: anything but empty is not ours
			if len(value) > 0 && string(value) != runtime.ContentTypeProtobuf {
				return nil, nil, errNotInPlace
			}
		}
		data = rest
	}
	apiVersion, _ := bytesField(typeMeta, 1)
	kind, _ := bytesField(typeMeta, 2)
	w := s.last.Load()
	if w == nil || string(apiVersion) != w.apiVersion || string(kind) != w.kind {
		w = &wireKind{apiVersion: string(apiVersion), kind: string(kind)}
		w.gvk = schema.FromAPIVersionAndKind(w.apiVersion, w.kind)
		s.last.Store(w)
	}
	obj, err := s.scheme.New(w.gvk)
	if err != nil {
		return nil, nil, errNotInPlace
	}
	u, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok {
		return nil, nil, errNotInPlace
	}
	if s.dropManagedFields {
		if b, ok := withoutManagedFields(raw); ok {
			err = u.Unmarshal(*b)
			spliceBuffers.Put(b)
			if err == nil {
				kindCopy := w.gvk
				return obj, &kindCopy, nil
			}
			if obj, err = s.scheme.New(w.gvk); err != nil { // the standard decoder's error, then
				return nil, nil, errNotInPlace
			}
			u = obj.(interface{ Unmarshal([]byte) error })
		}
	}
	if err := u.Unmarshal(raw); err != nil {
		return nil, nil, errNotInPlace
	}
	kindCopy := w.gvk
	return obj, &kindCopy, nil
}

// nextField reads one field of a protobuf message. value is the payload of a
// length-delimited field and nil for the other wire types, which are skipped.
func nextField(data []byte) (field uint64, value, rest []byte, ok bool) {
	tag, n := uvarint(data)
	if n <= 0 {
		return 0, nil, nil, false
	}
	data = data[n:]
	field = tag >> 3
	switch tag & 7 {
	case 0: // varint
		_, n = uvarint(data)
		if n <= 0 {
			return 0, nil, nil, false
		}
		return field, nil, data[n:], true
	case 1: // fixed64
		if len(data) < 8 {
			return 0, nil, nil, false
		}
		return field, nil, data[8:], true
	case 2: // length-delimited
		l, n := uvarint(data)
		if n <= 0 || l > uint64(len(data)-n) {
			return 0, nil, nil, false
		}
		end := n + int(l)
		return field, data[n:end:end], data[end:], true
	case 5: // fixed32
		if len(data) < 4 {
			return 0, nil, nil, false
		}
		return field, nil, data[4:], true
	}
	return 0, nil, nil, false
}

// bytesField returns the payload of the last occurrence of a
// length-delimited field of a message.
func bytesField(msg []byte, want uint64) ([]byte, bool) {
	var out []byte
	found := false
	for len(msg) > 0 {
		field, value, rest, ok := nextField(msg)
		if !ok {
			return nil, false
		}
		if field == want {
			out, found = value, true
		}
		msg = rest
	}
	return out, found
}

// uvarint decodes a protobuf varint; n <= 0 when data holds none.
func uvarint(data []byte) (v uint64, n int) {
	for i, b := range data {
		if i == 10 {
			return 0, -1
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
