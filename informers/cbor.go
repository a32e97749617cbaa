package informers

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
)

// Custom resources have no protobuf encoding, and JSON is the slowest way to
// read them: a JSON watch event is scanned four times (framing, finding its
// kind, validating, decoding). API servers that serve CBOR (KEP-4222, the
// CBORServingAndStorage feature) send the same objects as CBOR, which
// decodes in half the time. The cache asks for CBOR first and JSON second on
// each list and watch of a typed kind without protobuf, so it gets CBOR
// where the server serves it and JSON everywhere else, with no extra round
// trip.
//
// The Accept header is set per request because client-go's REST client drops
// CBOR from its configured content types unless its ClientsAllowCBOR feature
// gate is on, a process-wide switch a library should not flip.

// cborAccept is the Accept header of lists and watches of custom resources.
const cborAccept = runtime.ContentTypeCBOR + ";q=1," + runtime.ContentTypeJSON + ";q=0.9"

// cborCodecs is a NegotiatedSerializer that decodes JSON and CBOR, including
// the CBOR Sequence ("application/cbor-seq") of watch responses.
type cborCodecs struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

// newCBORCodecs returns the codecs of a REST client for the kinds of gv.
//
// Decoding CBOR into a typed object normally ends with "transcoding": every
// metav1.FieldsV1 and runtime.RawExtension in it is turned back into JSON,
// walking the object by reflection. For a custom resource that means its
// managedFields, which the cache strips anyway (unless keepManagedFields):
// transcoding them took a fifth of the CPU of a controller of custom
// resources. So when no kind of gv holds such a field outside its
// managedFields, and they are stripped, objects are decoded as they come.
func newCBORCodecs(scheme *runtime.Scheme, gv schema.GroupVersion, keepManagedFields bool) cborCodecs {
	base := serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo)).WithoutConversion()
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeCBOR {
			continue
		}
		if !keepManagedFields && !anyRawFields(scheme, gv) {
			info.Serializer = cbor.NewSerializer(scheme, scheme, cbor.Transcode(false))
			infos[i] = info
		}
		seq := info
		seq.MediaType, seq.MediaTypeSubType = runtime.ContentTypeCBORSequence, "cbor-seq"
		infos = append(infos, seq)
		break
	}
	return cborCodecs{NegotiatedSerializer: base, infos: infos}
}

var (
	rawExtensionType = reflect.TypeFor[runtime.RawExtension]()
	fieldsV1Type     = reflect.TypeFor[metav1.FieldsV1]()
	objectMetaType   = reflect.TypeFor[metav1.ObjectMeta]()
)

// anyRawFields reports whether a kind of gv in scheme may hold a
// runtime.RawExtension or metav1.FieldsV1 (or a field whose type says
// nothing, such as any), which CBOR decoding must transcode. The one
// exception is the object's own metadata.managedFields, which the cache
// strips before storing: a kind's top-level ObjectMeta, or that of each item
// of a list kind. Nested metadata (a pod template's) still counts. The
// answer covers the kinds gv has in the scheme when the REST client for gv
// is made; register kinds before the cache starts.
func anyRawFields(scheme *runtime.Scheme, gv schema.GroupVersion) bool {
	seen := map[reflect.Type]bool{}
	var raw func(t reflect.Type) bool
	raw = func(t reflect.Type) bool {
		if seen[t] {
			return false
		}
		seen[t] = true
		switch t {
		case rawExtensionType, fieldsV1Type:
			return true
		}
		switch t.Kind() {
		case reflect.Interface:
			return true
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return raw(t.Elem())
		case reflect.Map:
			return raw(t.Key()) || raw(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if raw(t.Field(i).Type) {
					return true
				}
			}
		}
		return false
	}
	// object checks a kind (or a list's item type): its fields, with the
	// managedFields of its own ObjectMeta exempt.
	var object func(t reflect.Type, list bool) bool
	object = func(t reflect.Type, list bool) bool {
		if t.Kind() != reflect.Struct {
			return raw(t)
		}
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Type == objectMetaType:
				for j := range objectMetaType.NumField() {
					if m := objectMetaType.Field(j); m.Name != "ManagedFields" && raw(m.Type) {
						return true
					}
				}
			case list && f.Name == "Items" && f.Type.Kind() == reflect.Slice:
				if object(f.Type.Elem(), false) {
					return true
				}
			default:
				if raw(f.Type) {
					return true
				}
			}
		}
		return false
	}
	for kind, t := range scheme.KnownTypes(gv) {
		if t.PkgPath() == objectMetaType.PkgPath() {
			continue // WatchEvent, options, Status: never cached
		}
		if object(t, strings.HasSuffix(kind, "List")) {
			return true
		}
	}
	return false
}

func (c cborCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }
