package informers

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A member of a sharding ring whose API server does not filter by shard
// lists the whole kind and keeps its part: decoded the standard way, each
// page's every object is decoded, and the objects of the other members'
// buckets are garbage at once. Worse, the strings and maps of the objects
// kept were allocated among theirs, so the spans holding them stay two
// thirds empty in a ring of three. decodeListKeeping reads each item's
// namespace and UID from the protobuf bytes and decodes only the items
// kept: the member decodes, and holds spans for, its own objects alone.

// protoList is how the protobuf encoding of one list type is read: its
// metadata (ListMeta) and items are fields 1 and 2, and each item's
// metadata (ObjectMeta) is its field 1, as for every list type generated
// for Kubernetes.
type protoList struct {
	ok    bool
	items int // index of the Items field
	meta  int // index of the ListMeta field
	elem  reflect.Type
}

// protoLists caches protoList by list type.
var protoLists sync.Map

// objectMetaFields are the field numbers of ObjectMeta's namespace and uid,
// read from its protobuf tags.
var objectMetaFields = sync.OnceValue(func() [2]uint64 {
	t := reflect.TypeFor[metav1.ObjectMeta]()
	var out [2]uint64
	for i, name := range []string{"Namespace", "UID"} {
		f, _ := t.FieldByName(name)
		out[i] = protoNumber(f)
	}
	return out
})

// protoNumber is the field number of a struct field's protobuf tag, 0
// without one.
func protoNumber(f reflect.StructField) uint64 {
	parts := strings.Split(f.Tag.Get("protobuf"), ",")
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.ParseUint(parts[1], 10, 64)
	return n
}

// protoListOf returns how list's type is read, ok false when it is not a
// pointer to a generated Kubernetes list whose items unmarshal from
// protobuf.
func protoListOf(list runtime.Object) protoList {
	t := reflect.TypeOf(list)
	if v, ok := protoLists.Load(t); ok {
		return v.(protoList)
	}
	var pl protoList
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		st := t.Elem()
		items, okItems := st.FieldByName("Items")
		lm, okMeta := st.FieldByName("ListMeta")
		if okItems && okMeta && len(items.Index) == 1 && len(lm.Index) == 1 &&
			items.Type.Kind() == reflect.Slice && items.Type.Elem().Kind() == reflect.Struct &&
			protoNumber(items) == 2 && protoNumber(lm) == 1 && lm.Type == reflect.TypeFor[metav1.ListMeta]() {
			elem := items.Type.Elem()
			om, okOM := elem.FieldByName("ObjectMeta")
			_, unmarshals := reflect.PointerTo(elem).MethodByName("Unmarshal")
			if okOM && protoNumber(om) == 1 && om.Type == reflect.TypeFor[metav1.ObjectMeta]() && unmarshals {
				pl = protoList{ok: true, items: items.Index[0], meta: lm.Index[0], elem: elem}
			}
		}
	}
	protoLists.Store(t, pl)
	return pl
}

// decodeListKeeping decodes data, a list in the protobuf encoding of
// Kubernetes (its runtime.Unknown envelope), into list, decoding only the
// items whose namespace and UID keep accepts; the others are skipped
// unread. It returns false, having changed nothing, when data is not such
// an encoding of a list of list's type: the caller then decodes it the
// standard way. keep is called once per item, in order.
func decodeListKeeping(data []byte, list runtime.Object, keep func(namespace, uid string) bool) (bool, error) {
	pl := protoListOf(list)
	if !pl.ok || !bytes.HasPrefix(data, protobufPrefix) {
		return false, nil
	}
	data = data[len(protobufPrefix):]
	var raw []byte
	for len(data) > 0 {
		field, value, rest, ok := nextField(data)
		if !ok {
			return false, nil
		}
		switch field {
		case 2:
			raw = value
		case 3, 4: // contentEncoding, contentType: anything but empty is not ours
			if len(value) > 0 && string(value) != runtime.ContentTypeProtobuf {
				return false, nil
			}
		}
		data = rest
	}
	var (
		listMeta []byte
		kept     [][]byte
		fields   = objectMetaFields()
	)
	for len(raw) > 0 {
		field, value, rest, ok := nextField(raw)
		if !ok {
			return false, nil
		}
		switch field {
		case 1:
			listMeta = value
		case 2:
			ns, uid, ok := itemNamespaceAndUID(value, fields)
			if !ok {
				return false, nil
			}
			if keep(ns, uid) {
				kept = append(kept, value)
			}
		}
		raw = rest
	}
	var lm metav1.ListMeta
	if err := lm.Unmarshal(listMeta); err != nil {
		return false, nil
	}
	items := reflect.MakeSlice(reflect.SliceOf(pl.elem), len(kept), len(kept))
	for i, b := range kept {
		u := items.Index(i).Addr().Interface().(interface{ Unmarshal([]byte) error })
		if err := u.Unmarshal(b); err != nil {
			return false, nil
		}
	}
	v := reflect.ValueOf(list).Elem()
	v.Field(pl.meta).Set(reflect.ValueOf(lm))
	v.Field(pl.items).Set(items)
	return true, nil
}

// itemNamespaceAndUID reads the namespace and UID of an item's metadata
// (its field 1) without decoding the item.
func itemNamespaceAndUID(item []byte, fields [2]uint64) (namespace, uid string, ok bool) {
	var meta []byte
	for len(item) > 0 {
		field, value, rest, ok := nextField(item)
		if !ok {
			return "", "", false
		}
		if field == 1 {
			meta = value
		}
		item = rest
	}
	for len(meta) > 0 {
		field, value, rest, ok := nextField(meta)
		if !ok {
			return "", "", false
		}
		switch field {
		case fields[0]:
			namespace = string(value)
		case fields[1]:
			uid = string(value)
		}
		meta = rest
	}
	return namespace, uid, true
}
