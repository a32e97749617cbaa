package informers

import "sync"

// Dropping managedFields after decoding costs a decode of them first: for
// a Pod, a few KB of JSON copied into FieldsV1 and a timestamp per entry,
// all garbage as soon as the cache's transform runs. When the cache drops
// them anyway, the object decoder leaves them out of the bytes instead:
// the object's metadata (field 1 of every Kubernetes object) without its
// managedFields (field 17 of ObjectMeta) is written to a pooled buffer,
// which Unmarshal then reads (it copies what it keeps). Only the metadata's
// length prefix changes. Bytes that are not such an object are decoded as
// they are.

// managedFieldsField is ObjectMeta's managedFields.
const managedFieldsField = 17

// spliceBuffers are the pooled buffers of withoutManagedFields.
var spliceBuffers = sync.Pool{New: func() any { return new([]byte) }}

// withoutManagedFields returns the protobuf object msg with its
// metadata's managedFields left out, in a buffer from spliceBuffers that
// the caller puts back once it decoded it. ok is false, and msg untouched,
// when msg has no managedFields or is not a message whose field 1 is a
// message.
func withoutManagedFields(msg []byte) (out *[]byte, ok bool) {
	// Find the metadata and the managedFields in it before writing anything.
	var meta []byte
	metaAt := -1 // offset of the metadata's tag in msg
	for rest := msg; len(rest) > 0; {
		field, value, next, ok := nextField(rest)
		if !ok {
			return nil, false
		}
		if field == 1 {
			if metaAt >= 0 || value == nil {
				return nil, false // twice, or not length-delimited
			}
			metaAt, meta = len(msg)-len(rest), value
		}
		rest = next
	}
	if metaAt < 0 || msg[metaAt] != 0x0a { // field 1, length-delimited, in one byte
		return nil, false
	}
	dropped := 0
	for rest := meta; len(rest) > 0; {
		field, _, next, ok := nextField(rest)
		if !ok {
			return nil, false
		}
		if field == managedFieldsField {
			dropped += len(rest) - len(next)
		}
		rest = next
	}
	if dropped == 0 {
		return nil, false
	}
	_, n := uvarint(msg[metaAt+1:])
	after := msg[metaAt+1+n+len(meta):]
	out = spliceBuffers.Get().(*[]byte)
	b := append((*out)[:0], msg[:metaAt+1]...)
	b = appendUvarint(b, uint64(len(meta)-dropped))
	for rest := meta; len(rest) > 0; {
		field, _, next, _ := nextField(rest)
		if field != managedFieldsField {
			b = append(b, rest[:len(rest)-len(next)]...)
		}
		rest = next
	}
	*out = append(b, after...)
	return out, true
}

// appendUvarint appends v as a protobuf varint.
func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
