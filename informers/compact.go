package informers

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/memsize"
)

// CompactOptions configures how the cache keeps one kind's objects in
// compact form (see Options.Compact).
type CompactOptions struct {
	// Decoded is how many decoded objects of the kind the cache keeps
	// beside their compact form, shared by every informer of the kind, so
	// that the reads and events of objects just changed or read often skip
	// decoding: an object is kept when an event brings it and when Get
	// (not List) decodes it, and the least recently used are let go
	// (CLOCK). Zero means 256; negative means none, so every read and
	// every event decodes.
	Decoded int

	// DisableCompression keeps every encoding as it is. Zero (false) means
	// an encoding of at least 512 bytes is compressed with DEFLATE at its
	// fastest level when that saves at least an eighth of it, which costs
	// some microseconds per event and per decode.
	DisableCompression bool
}

const (
	defaultDecoded = 256
	// minCompress is the size below which an encoding is kept as it is.
	minCompress = 512
)

// withDefaults returns o with zero fields at their defaults.
func (o CompactOptions) withDefaults() CompactOptions {
	if o.Decoded == 0 {
		o.Decoded = defaultDecoded
	}
	return o
}

// errReadOnly is the panic of a setter called on a compact record: records
// are the cache's own and never reach code that could call one.
const errReadOnly = "informers: a compact cached object is read-only"

// compactCodec encodes and decodes the objects of one kind in one mode, for
// every informer of that kind and mode (see Cache.compactFor).
type compactCodec struct {
	gvk  schema.GroupVersionKind
	mode Mode
	// goType is the Go type typed objects decode as; nil in Unstructured
	// mode.
	goType reflect.Type
	// proto is set for typed kinds with a protobuf encoding; others are
	// JSON.
	proto    bool
	compress bool
	// decoded keeps recently decoded objects; nil for none.
	decoded *decodedCache
	share   *sharer
	// dropLabels, a test hook, makes records lose their objects' labels:
	// the negative control of the suites that read labels from records.
	dropLabels bool
}

// protoMessage is what generated protobuf code gives a typed API object.
type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// newCompactCodec returns the codec of gvk in mode, which must be Typed
// (goType set) or Unstructured.
func newCompactCodec(gvk schema.GroupVersionKind, mode Mode, goType reflect.Type, o CompactOptions, share *sharer) *compactCodec {
	o = o.withDefaults()
	c := &compactCodec{gvk: gvk, mode: mode, goType: goType, compress: !o.DisableCompression, share: share}
	if goType != nil {
		_, c.proto = reflect.New(goType.Elem()).Interface().(protoMessage)
	}
	if o.Decoded > 0 {
		c.decoded = newDecodedCache(o.Decoded)
	}
	return c
}

// compactObject is how a compact informer stores an object: the metadata
// the cache reads without decoding (its key, namespace index, labels,
// owners and read-your-writes need namespace, name, UID, resourceVersion
// and labels) beside the object's encoding without them. It implements
// metav1.Object, for client-go's keys and indexes; the getters of fields
// kept in the body decode it, and the setters panic. Records never leave
// package informers: reads and listeners get decoded objects (see
// entry.object).
type compactObject struct {
	codec *compactCodec
	// namespace is shared with the cache's other objects (sharer).
	namespace string
	// strs holds the name, UID and resourceVersion, one after the other.
	strs           string
	nameLen, uidLe uint16
	// labels and owners are shared with the cache's other objects.
	labels map[string]string
	owners []metav1.OwnerReference
	// body is the encoding, compressed when compressed is set.
	body       []byte
	compressed bool
	// kindSet records that the object had its apiVersion and kind set.
	kindSet bool
}

// recordSize is the allocation of one compactObject.
var recordSize = memsize.Alloc(int64(unsafe.Sizeof(compactObject{})), true)

// heapBytes returns the heap bytes of r that are its own (shared labels,
// owners and namespace are counted once, by the sharer).
func (r *compactObject) heapBytes() int64 {
	return recordSize + memsize.Alloc(int64(len(r.strs)), false) + memsize.Alloc(int64(cap(r.body)), false)
}

// fits reports whether obj is an object of c's Go type (in Unstructured
// mode, an *unstructured.Unstructured), which encode takes.
func (c *compactCodec) fits(obj any) bool {
	if c.goType == nil {
		_, ok := obj.(*unstructured.Unstructured)
		return ok
	}
	return reflect.TypeOf(obj) == c.goType
}

// encode returns obj's record, and obj with maps and slices of its own
// (the record may share obj's labels and owners with other records, and
// obj may be handed to readers). A record is returned as it is: the
// informer's transform may see an object twice.
func (c *compactCodec) encode(obj any) (*compactObject, runtime.Object, error) {
	if r, ok := obj.(*compactObject); ok {
		return r, nil, nil
	}
	ro, ok := obj.(runtime.Object)
	m, ok2 := obj.(metav1.Object)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("%T has no object metadata", obj)
	}
	ns, name, uid, rv := m.GetNamespace(), m.GetName(), string(m.GetUID()), m.GetResourceVersion()
	labels, owners := m.GetLabels(), m.GetOwnerReferences()
	if len(name) > 0xffff || len(uid) > 0xffff {
		return nil, nil, fmt.Errorf("name or UID of %s/%s too long", ns, name)
	}
	kindSet := !ro.GetObjectKind().GroupVersionKind().Empty()
	m.SetNamespace("")
	m.SetName("")
	m.SetUID("")
	m.SetResourceVersion("")
	m.SetLabels(nil)
	m.SetOwnerReferences(nil)
	body, err := c.marshal(ro)
	m.SetNamespace(ns)
	m.SetName(name)
	m.SetUID(types.UID(uid))
	m.SetResourceVersion(rv)
	m.SetLabels(maps.Clone(labels))
	m.SetOwnerReferences(copyOwners(owners))
	if err != nil {
		return nil, nil, err
	}
	r := &compactObject{codec: c, strs: name + uid + rv, nameLen: uint16(len(name)), uidLe: uint16(len(uid)), kindSet: kindSet}
	if len(labels) == 0 || c.dropLabels {
		labels = nil
	}
	if len(owners) == 0 {
		owners = nil
	}
	if s := c.share; s != nil {
		s.mu.Lock()
		if ns != "" {
			ns = s.string(ns)
		}
		labels = s.stringMap(labels)
		if owners != nil {
			owners = s.owners(owners)
		}
		s.mu.Unlock()
	}
	r.namespace, r.labels, r.owners = ns, labels, owners
	r.body, r.compressed = c.pack(body)
	return r, ro, nil
}

// copyOwners returns a deep copy of refs, nil for none.
func copyOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]metav1.OwnerReference, len(refs))
	for i := range refs {
		refs[i].DeepCopyInto(&out[i])
	}
	return out
}

func (c *compactCodec) marshal(obj runtime.Object) ([]byte, error) {
	switch {
	case c.proto:
		return obj.(protoMessage).Marshal()
	case c.mode == Unstructured:
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%T is not *unstructured.Unstructured", obj)
		}
		return u.MarshalJSON()
	}
	return json.Marshal(obj)
}

// flateWriters and flateReaders pool compressors and decompressors.
var (
	flateWriters = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
		return w
	}}
	flateReaders sync.Pool
)

// pack returns body compressed when that is on and saves at least an
// eighth of it, else as it is; either way in an allocation of its own
// size. A compressed body starts with the length of the uncompressed one
// (a uvarint).
func (c *compactCodec) pack(body []byte) ([]byte, bool) {
	if c.compress && len(body) >= minCompress {
		var buf bytes.Buffer
		buf.Grow(len(body))
		buf.Write(binary.AppendUvarint(nil, uint64(len(body))))
		w := flateWriters.Get().(*flate.Writer)
		w.Reset(&buf)
		_, err := w.Write(body)
		if err == nil {
			err = w.Close()
		}
		flateWriters.Put(w)
		if err == nil && buf.Len() <= len(body)-len(body)/8 {
			return bytes.Clone(buf.Bytes()), true
		}
	}
	if cap(body) == len(body) {
		return body, false
	}
	return bytes.Clone(body), false
}

// unpack returns r's encoding, uncompressed.
func (r *compactObject) unpack() ([]byte, error) {
	if !r.compressed {
		return r.body, nil
	}
	n, k := binary.Uvarint(r.body)
	if k <= 0 || n > 1<<30 {
		return nil, errors.New("corrupt compressed body")
	}
	src := bytes.NewReader(r.body[k:])
	fr, _ := flateReaders.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(src)
	} else if err := fr.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, err
	}
	defer flateReaders.Put(fr)
	out := make([]byte, n)
	if _, err := io.ReadFull(fr, out); err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return out, nil
}

// decode returns a new object decoded from r, which owns all its memory
// but its strings: a reader may modify it without changing r.
func (r *compactObject) decode() (runtime.Object, error) {
	c := r.codec
	body, err := r.unpack()
	if err != nil {
		return nil, err
	}
	var obj runtime.Object
	switch {
	case c.mode == Unstructured:
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(body); err != nil {
			return nil, err
		}
		obj = u
	default:
		obj = reflect.New(c.goType.Elem()).Interface().(runtime.Object)
		if c.proto {
			err = obj.(protoMessage).Unmarshal(body)
		} else {
			err = json.Unmarshal(body, obj)
		}
		if err != nil {
			return nil, err
		}
	}
	m := obj.(metav1.Object) // encode checked it
	m.SetNamespace(r.namespace)
	m.SetName(r.GetName())
	m.SetUID(r.GetUID())
	m.SetResourceVersion(r.GetResourceVersion())
	if r.labels != nil {
		m.SetLabels(maps.Clone(r.labels))
	}
	if r.owners != nil {
		m.SetOwnerReferences(copyOwners(r.owners))
	}
	if r.kindSet {
		obj.GetObjectKind().SetGroupVersionKind(c.gvk)
	} else if c.mode == Typed {
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return obj, nil
}

// object returns r decoded: the decoded object the kind's cache of them
// holds for r, else one decoded now, kept there when keep is set.
func (r *compactObject) object(keep bool) (runtime.Object, error) {
	d := r.codec.decoded
	if d != nil {
		if obj, ok := d.get(r); ok {
			return obj, nil
		}
	}
	obj, err := r.decode()
	if err != nil {
		return nil, fmt.Errorf("informers: decode cached %s %s: %w", describe(r.codec.gvk), r.key(), err)
	}
	if keep && d != nil {
		d.put(r, obj)
	}
	return obj, nil
}

// key is r's store key.
func (r *compactObject) key() string {
	if r.namespace == "" {
		return r.GetName()
	}
	return r.namespace + "/" + r.GetName()
}

// full returns r's metadata decoded, for the getters of fields only the
// body holds; a record that does not decode reads as empty metadata.
func (r *compactObject) full() metav1.Object {
	obj, err := r.object(false)
	if err != nil {
		return &metav1.ObjectMeta{}
	}
	return obj.(metav1.Object)
}

var _ metav1.Object = (*compactObject)(nil)

func (r *compactObject) GetNamespace() string { return r.namespace }
func (r *compactObject) GetName() string      { return r.strs[:r.nameLen] }
func (r *compactObject) GetUID() types.UID {
	return types.UID(r.strs[r.nameLen : r.nameLen+r.uidLe])
}
func (r *compactObject) GetResourceVersion() string                  { return r.strs[r.nameLen+r.uidLe:] }
func (r *compactObject) GetLabels() map[string]string                { return r.labels }
func (r *compactObject) GetOwnerReferences() []metav1.OwnerReference { return r.owners }
func (r *compactObject) GetGenerateName() string                     { return r.full().GetGenerateName() }
func (r *compactObject) GetGeneration() int64                        { return r.full().GetGeneration() }
func (r *compactObject) GetSelfLink() string                         { return r.full().GetSelfLink() }
func (r *compactObject) GetCreationTimestamp() metav1.Time           { return r.full().GetCreationTimestamp() }
func (r *compactObject) GetDeletionTimestamp() *metav1.Time          { return r.full().GetDeletionTimestamp() }
func (r *compactObject) GetDeletionGracePeriodSeconds() *int64 {
	return r.full().GetDeletionGracePeriodSeconds()
}
func (r *compactObject) GetAnnotations() map[string]string { return r.full().GetAnnotations() }
func (r *compactObject) GetFinalizers() []string           { return r.full().GetFinalizers() }
func (r *compactObject) GetManagedFields() []metav1.ManagedFieldsEntry {
	return r.full().GetManagedFields()
}

func (r *compactObject) SetNamespace(string)                          { panic(errReadOnly) }
func (r *compactObject) SetName(string)                               { panic(errReadOnly) }
func (r *compactObject) SetGenerateName(string)                       { panic(errReadOnly) }
func (r *compactObject) SetUID(types.UID)                             { panic(errReadOnly) }
func (r *compactObject) SetResourceVersion(string)                    { panic(errReadOnly) }
func (r *compactObject) SetGeneration(int64)                          { panic(errReadOnly) }
func (r *compactObject) SetSelfLink(string)                           { panic(errReadOnly) }
func (r *compactObject) SetCreationTimestamp(metav1.Time)             { panic(errReadOnly) }
func (r *compactObject) SetDeletionTimestamp(*metav1.Time)            { panic(errReadOnly) }
func (r *compactObject) SetDeletionGracePeriodSeconds(*int64)         { panic(errReadOnly) }
func (r *compactObject) SetLabels(map[string]string)                  { panic(errReadOnly) }
func (r *compactObject) SetAnnotations(map[string]string)             { panic(errReadOnly) }
func (r *compactObject) SetFinalizers([]string)                       { panic(errReadOnly) }
func (r *compactObject) SetOwnerReferences([]metav1.OwnerReference)   { panic(errReadOnly) }
func (r *compactObject) SetManagedFields([]metav1.ManagedFieldsEntry) { panic(errReadOnly) }
