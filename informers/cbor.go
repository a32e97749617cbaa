package informers

import (
	"k8s.io/apimachinery/pkg/runtime"
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

func newCBORCodecs(scheme *runtime.Scheme) cborCodecs {
	base := serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo)).WithoutConversion()
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for _, info := range infos {
		if info.MediaType == runtime.ContentTypeCBOR {
			seq := info
			seq.MediaType, seq.MediaTypeSubType = runtime.ContentTypeCBORSequence, "cbor-seq"
			infos = append(infos, seq)
			break
		}
	}
	return cborCodecs{NegotiatedSerializer: base, infos: infos}
}

func (c cborCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }
