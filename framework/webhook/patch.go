package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON keeps "value" for add and replace even when it is null.
func (p patchOp) MarshalJSON() ([]byte, error) {
	if p.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{p.Op, p.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{p.Op, p.Path, p.Value})
}

// jsonPatch returns the RFC 6902 patch that makes the document orig (the
// request's object) carry the changes from before to after (T's encoding of
// the object before and after defaulting), or nil when there are none. The
// patch is the difference between orig and merged(orig, before, after):
// what T's encodings differ in, changed at the same place in orig, so the
// fields of orig that T does not know stay where they are.
func jsonPatch(orig, before, after []byte) ([]byte, error) {
	return typedJSONPatch(orig, before, after, nil)
}

// typedJSONPatch is jsonPatch for T of Go type typ (nil: unknown). What
// the Defaulter added (a value where the request and T's encoding before
// defaulting have none or null, a list element of no source) comes
// without the zero values T's encoding gives the fields of a struct the
// Defaulter did not set (see withoutZeros): a struct without omitempty
// would else write each of them, and a CRD's structural default, which
// kube-apiserver applies after the mutating webhooks, would find the
// field set. A field the Defaulter set to its zero value on purpose, in
// a struct it added, is left out too and so to the server's default, as
// omitempty would.
func typedJSONPatch(orig, before, after []byte, typ reflect.Type) ([]byte, error) {
	if bytes.Equal(before, after) {
		return nil, nil
	}
	var o, b, a any
	for _, d := range []struct {
		name string
		raw  []byte
		dst  *any
	}{{"object", orig, &o}, {"object before defaulting", before, &b}, {"object after defaulting", after, &a}} {
		dec := json.NewDecoder(bytes.NewReader(d.raw))
		dec.UseNumber()
		if err := dec.Decode(d.dst); err != nil {
			return nil, fmt.Errorf("decode %s: %w", d.name, err)
		}
	}
	var ops []patchOp
	diff(&ops, "", o, merged(o, b, a, typ))
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// diff appends to ops what turns the value o at path into w: maps key by
// key, lists of the same length element by element, anything else
// replaced whole.
func diff(ops *[]patchOp, path string, o, w any) {
	if reflect.DeepEqual(o, w) {
		return
	}
	switch wv := w.(type) {
	case map[string]any:
		om, ok := o.(map[string]any)
		if !ok {
			break
		}
		for _, k := range sortedKeys(om, wv) {
			ov, inO := om[k]
			v, inW := wv[k]
			p := path + "/" + escapePointer(k)
			switch {
			case inO && inW:
				diff(ops, p, ov, v)
			case inW:
				*ops = append(*ops, patchOp{Op: "add", Path: p, Value: v})
			default:
				*ops = append(*ops, patchOp{Op: "remove", Path: p})
			}
		}
		return
	case []any:
		ol, ok := o.([]any)
		if !ok || len(ol) != len(wv) {
			break
		}
		for i := range wv {
			diff(ops, path+"/"+strconv.Itoa(i), ol[i], wv[i])
		}
		return
	}
	*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: w})
}

// absent stands for a value of the request that T's encoding omits (a
// zero omitzero struct, which may still hold fields T does not know): to
// T, it is empty.
type absent struct{}

// merged returns the request's value o carrying the change from b (T's
// encoding of o, or absent) to a (T's encoding after defaulting). Where b
// and a agree, o is kept as it is. In a map, a key of o that b lacks and
// a lacks too (a field T does not know, or a zero one it omits) stays, a
// key the Defaulter removed goes, and the others are merged key by key;
// a map T omitted is merged as T's encoding of the zero struct (an empty
// map when t is unknown), so a defaulted omitzero struct keeps the fields
// T does not know and gets none of the zero values of the others. In a
// list, each element of a is merged with the request's element it comes
// from (see sources).
// Anything else is a. t is the Go type of a (nil when unknown): a value
// the Defaulter added loses its zero values (withoutZeros).
func merged(o, b, a any, t reflect.Type) any {
	if reflect.DeepEqual(b, a) {
		return o
	}
	switch av := a.(type) {
	case map[string]any:
		om, ok1 := o.(map[string]any)
		bm, ok2 := b.(map[string]any)
		if _, omitted := b.(absent); omitted {
			// T omitted the zero struct: before defaulting it was
			// that, as T encodes a zero struct it does not omit.
			bm, ok2 = zeroObject(t), true
		}
		if !ok1 || !ok2 {
			break
		}
		out := make(map[string]any, len(om)+len(av))
		for k, v := range om {
			_, inB := bm[k]
			_, inA := av[k]
			if !inB && !inA {
				out[k] = v
			}
		}
		for k, v := range av {
			ov, inO := om[k]
			bv, inB := bm[k]
			ft := fieldType(t, k)
			if !inO {
				// The request lacks k. When T's encoding had it before
				// defaulting too, it is T's own zero value (an empty
				// struct, a null): the request gets only what the
				// Defaulter changed in it.
				switch {
				case inB && reflect.DeepEqual(bv, v):
				case !inB || bv == nil:
					// Added by the Defaulter.
					out[k] = withoutZeros(v, ft)
				default:
					if _, isMap := bv.(map[string]any); isMap {
						out[k] = merged(map[string]any{}, bv, v, ft)
					} else {
						out[k] = v
					}
				}
				continue
			}
			if !inB {
				bv = absent{}
			}
			out[k] = merged(ov, bv, v, ft)
		}
		return out
	case []any:
		ol, ok1 := o.([]any)
		bl, ok2 := b.([]any)
		if !ok1 || !ok2 || len(ol) != len(bl) {
			break
		}
		src := sources(bl, av)
		et := elemType(t)
		out := make([]any, len(av))
		for i, v := range av {
			if j := src[i]; j >= 0 {
				out[i] = merged(ol[j], bl[j], v, et)
			} else {
				out[i] = withoutZeros(v, et)
			}
		}
		return out
	}
	if _, omitted := b.(absent); omitted || b == nil {
		return withoutZeros(a, t)
	}
	return a
}

// withoutZeros returns v, a value of Go type t that the Defaulter added,
// without the keys of its structs whose values are those of the struct's
// zero value as T encodes it (fields the Defaulter left unset: a
// non-omitempty 0, "", false, or a struct of them), deep ones too. Maps
// keep their keys, lists their elements; a struct with its own encoding
// (a json.Marshaler), or of unknown type, is kept whole.
func withoutZeros(v any, t reflect.Type) any {
	t = deref(t)
	if t == nil {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		switch {
		case t.Kind() == reflect.Struct && !marshals(t):
			zero := zeroEncoding(t)
			for k, e := range x {
				if z, ok := zero[k]; ok && reflect.DeepEqual(e, z) {
					continue
				}
				out[k] = withoutZeros(e, fieldType(t, k))
			}
		case t.Kind() == reflect.Map:
			for k, e := range x {
				out[k] = withoutZeros(e, t.Elem())
			}
		default:
			return v
		}
		return out
	case []any:
		et := elemType(t)
		if et == nil {
			return v
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutZeros(e, et)
		}
		return out
	}
	return v
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	zeroEncodings sync.Map // reflect.Type → map[string]any
)

// marshals reports whether t (or *t) has its own JSON encoding.
func marshals(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
}

// zeroEncoding returns the zero value of the struct type t as
// encoding/json encodes it, decoded (numbers as json.Number, as jsonPatch
// decodes), or nil.
func zeroEncoding(t reflect.Type) map[string]any {
	if z, ok := zeroEncodings.Load(t); ok {
		return z.(map[string]any)
	}
	var z map[string]any
	if raw, err := json.Marshal(reflect.New(t).Interface()); err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&z) != nil {
			z = nil
		}
	}
	zeroEncodings.Store(t, z)
	return z
}

// zeroObject returns the encoding of the zero value of t when t is a
// struct type without its own encoding, else an empty map. It must not be
// changed.
func zeroObject(t reflect.Type) map[string]any {
	if t = deref(t); t != nil && t.Kind() == reflect.Struct && !marshals(t) {
		if z := zeroEncoding(t); z != nil {
			return z
		}
	}
	return map[string]any{}
}

// deref returns t without its pointers.
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// elemType returns the type of the elements of the slice or array type t,
// or nil.
func elemType(t reflect.Type) reflect.Type {
	t = deref(t)
	if t == nil || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) || marshals(t) {
		return nil
	}
	return t.Elem()
}

// fieldType returns the type of the value at key k of t, a struct (the
// field encoding/json names k, embedded structs' too) or a map, or nil.
func fieldType(t reflect.Type, k string) reflect.Type {
	t = deref(t)
	if t == nil || marshals(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
	default:
		return nil
	}
	// A field of t itself first, as encoding/json prefers it to one of an
	// embedded struct.
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		n, _, _ := strings.Cut(tag, ",")
		if n == "" && f.Anonymous {
			if et := deref(f.Type); et != nil && et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if n == "" {
			n = f.Name
		}
		if n == k {
			return f.Type
		}
	}
	for _, et := range embedded {
		if ft := fieldType(et, k); ft != nil {
			return ft
		}
	}
	return nil
}

// sortedKeys returns the keys of x and y, once each, sorted, so patches are
// deterministic.
func sortedKeys(x, y map[string]any) []string {
	keys := make([]string, 0, len(x)+len(y))
	for k := range x {
		keys = append(keys, k)
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
