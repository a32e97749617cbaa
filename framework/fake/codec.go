package fake

import (
	"mime"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// encoding is how one response is written: a media type the client
// accepts, and whether it asked for metadata only.
type encoding struct {
	info runtime.SerializerInfo
	// metadata is set when the client asked for PartialObjectMetadata (a
	// media type parameter "as=PartialObjectMetadata" or "...List").
	metadata bool
	// contentType is the response's Content-Type.
	contentType string
}

// negotiate picks the first media type of accept that the server can send
// for a kind (proto: whether it has a protobuf encoding): JSON, protobuf
// for built-in kinds, CBOR for the others (as an API server with
// CBORServingAndStorage does). An empty Accept, or one that names nothing
// the server sends, gets JSON.
func negotiate(codecs serializer.CodecFactory, accept string, proto bool) encoding {
	infos := codecs.SupportedMediaTypes()
	find := func(mediaType string) (runtime.SerializerInfo, bool) {
		return runtime.SerializerInfoForMediaType(infos, mediaType)
	}
	for _, part := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case runtime.ContentTypeJSON, "*/*", "application/*":
			mediaType = runtime.ContentTypeJSON
		case runtime.ContentTypeProtobuf:
			if !proto && params["as"] == "" {
				continue
			}
		case runtime.ContentTypeCBOR:
			if proto || params["as"] != "" {
				continue
			}
		default:
			continue
		}
		info, _ := find(mediaType)
		e := encoding{info: info, contentType: mediaType}
		if as := params["as"]; as == "PartialObjectMetadata" || as == "PartialObjectMetadataList" {
			e.metadata = true
			e.contentType = mime.FormatMediaType(mediaType, map[string]string{"as": as, "g": "meta.k8s.io", "v": "v1"})
		}
		return e
	}
	info, _ := find(runtime.ContentTypeJSON)
	return encoding{info: info, contentType: runtime.ContentTypeJSON}
}

// shape turns obj into what the client asked for: the object itself, or
// its metadata. Stored objects carry their apiVersion and kind.
func (e encoding) shape(obj runtime.Object) runtime.Object {
	if !e.metadata {
		return obj
	}
	if meta.IsListType(obj) {
		out := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
		if lm, err := meta.ListAccessor(obj); err == nil {
			out.ResourceVersion = lm.GetResourceVersion()
		}
		_ = meta.EachListItem(obj, func(item runtime.Object) error {
			out.Items = append(out.Items, *partial(item))
			return nil
		})
		return out
	}
	if _, ok := obj.(*metav1.Status); ok {
		return obj
	}
	return partial(obj)
}

func partial(obj runtime.Object) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			m.ObjectMeta = *om.DeepCopy()
		}
	}
	return m
}

// write sends obj with status code.
func (e encoding) write(w http.ResponseWriter, code int, obj runtime.Object) {
	w.Header().Set("Content-Type", e.contentType)
	w.WriteHeader(code)
	_ = e.info.Serializer.Encode(e.shape(obj), w)
}
