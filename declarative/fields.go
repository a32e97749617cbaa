package declarative

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// setFields returns the JSON form of a declared Go object holding only the
// fields it sets, for an apply body: server-side apply takes ownership of
// every field an apply names, so a field sent at its zero value would be
// claimed, and another manager's value reset, although the object never
// declared it.
//
// A Go struct cannot say whether a field was left out or set to its zero
// value, so the rule follows the Kubernetes API conventions, under which a
// field whose zero value means something is a pointer:
//
//   - a nil pointer, interface, map or slice is not set;
//   - a non-pointer field holding its zero value is not set: 0, "", false,
//     and structs none of whose fields is set (an IntOrString or Quantity at
//     zero, an empty DeploymentStrategy or ResourceRequirements), as
//     encoding/json's omitzero would leave them out;
//   - a non-nil pointer is set, whatever it points to (replicas: 0 through
//     an *int32, emptyDir: {} through an *EmptyDirVolumeSource), and so are
//     list elements and map values;
//   - otherwise encoding/json decides: field names and omitempty come from
//     the json tags, embedded structs are inlined, and values with their own
//     MarshalJSON or MarshalText (Quantity, IntOrString, Time, RawExtension)
//     are encoded by it.
//
// Numbers come out as int64 or float64, as in unstructured objects.
func setFields(v any) (any, error) {
	out, _, err := encodeSet(reflect.ValueOf(v), true)
	return out, err
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodeSet encodes v when it is set (see setFields); force says v is set
// whatever it holds (it is pointed to, or a list element or map value). ok is
// false when v is not set.
func encodeSet(v reflect.Value, force bool) (out any, ok bool, err error) {
	if !v.IsValid() {
		return nil, false, nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, false, nil
		}
		return encodeSet(v.Elem(), true)
	}
	if m, ok := marshaler(v); ok {
		if !force && v.IsZero() {
			return nil, false, nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, false, err
		}
		var out any
		if err := utiljson.Unmarshal(b, &out); err != nil {
			return nil, false, err
		}
		return out, out != nil, nil
	}
	switch v.Kind() {
	case reflect.Struct:
		m := map[string]any{}
		if err := encodeStruct(v, m); err != nil {
			return nil, false, err
		}
		if len(m) == 0 && !force {
			return nil, false, nil
		}
		return m, true, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, false, nil
		}
		m, err := encodeMap(v)
		return m, err == nil, err
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, false, nil
		}
		l, err := encodeList(v)
		return l, err == nil, err
	}
	if !force && v.IsZero() {
		return nil, false, nil
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool(), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int64(v.Uint()), true, nil //nolint:gosec // API integers are int64
	case reflect.Float32, reflect.Float64:
		return v.Float(), true, nil
	case reflect.String:
		return v.String(), true, nil
	}
	return nil, false, fmt.Errorf("cannot encode a %s as JSON", v.Type())
}

// encodeMap encodes the entries of the map v, each value set.
func encodeMap(v reflect.Value) (map[string]any, error) {
	m := make(map[string]any, v.Len())
	for it := v.MapRange(); it.Next(); {
		k, err := mapKey(it.Key())
		if err != nil {
			return nil, err
		}
		if e, ok, err := encodeSet(it.Value(), true); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		} else if ok {
			m[k] = e
		}
	}
	return m, nil
}

// encodeList encodes the elements of the slice or array v, each set; a
// []byte as a base64 string, as encoding/json does.
func encodeList(v reflect.Value) (any, error) {
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return nil, err
		}
		var s string
		err = json.Unmarshal(b, &s)
		return s, err
	}
	l := make([]any, v.Len())
	for i := range l {
		e, _, err := encodeSet(v.Index(i), true)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		l[i] = e
	}
	return l, nil
}

// marshaler returns the value to hand encoding/json when v encodes itself
// (MarshalJSON or MarshalText, with a value or pointer receiver).
func marshaler(v reflect.Value) (any, bool) {
	t := v.Type()
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		return v.Interface(), true
	}
	if pt := reflect.PointerTo(t); pt.Implements(jsonMarshaler) || pt.Implements(textMarshaler) {
		p := reflect.New(t)
		p.Elem().Set(v)
		return p.Interface(), true
	}
	return nil, false
}

// encodeStruct adds the set fields of struct v to m, inlining embedded
// structs whose fields encoding/json promotes; a field of the outer struct
// wins over a promoted one of the same name.
func encodeStruct(v reflect.Value, m map[string]any) error {
	t := v.Type()
	var embedded []reflect.Value
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						continue
					}
					fv = fv.Elem()
				}
				embedded = append(embedded, fv)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if hasOption(opts, "omitempty") && emptyJSON(fv) {
			continue
		}
		e, ok, err := encodeSet(fv, false)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if ok {
			if hasOption(opts, "string") {
				e = quoted(e)
			}
			m[name] = e
		}
	}
	for _, ev := range embedded {
		inner := map[string]any{}
		if err := encodeStruct(ev, inner); err != nil {
			return err
		}
		for k, e := range inner {
			if _, taken := m[k]; !taken {
				m[k] = e
			}
		}
	}
	return nil
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// emptyJSON reports whether omitempty leaves v out.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return v.IsZero()
	}
	return false
}

// quoted encodes a scalar as a JSON string, as the ",string" tag option does.
func quoted(e any) any {
	switch x := e.(type) {
	case string:
		return strconv.Quote(x)
	case bool, int64, float64:
		return fmt.Sprint(x)
	}
	return e
}

// mapKey encodes a map key as encoding/json does.
func mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		return string(b), err
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("cannot encode a map key of type %s", k.Type())
}
