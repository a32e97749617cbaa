package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
// request's object) carry the changes from before to after (the object
// encoded before and after defaulting), or nil when there are none. Only
// what differs between before and after is patched, at the same place in
// orig: fields of orig that before lacks (unknown to the Go type) stay.
// A list whose elements were added, removed or moved is replaced whole, each
// element that was there before built on its own element of orig, so its
// unknown fields stay too.
func jsonPatch(orig, before, after []byte) ([]byte, error) {
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
	diff(&ops, "", o, true, b, a)
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// diff appends to ops what turns the value o at path (present when inOrig)
// into one carrying the change from b to a.
func diff(ops *[]patchOp, path string, o any, inOrig bool, b, a any) {
	if reflect.DeepEqual(b, a) {
		return
	}
	if !inOrig {
		*ops = append(*ops, patchOp{Op: "add", Path: path, Value: a})
		return
	}
	switch av := a.(type) {
	case map[string]any:
		om, bm, ok := both[map[string]any](o, b)
		if !ok {
			break
		}
		for _, k := range sortedKeys(bm, av) {
			bv, inB := bm[k]
			aval, inA := av[k]
			ov, inO := om[k]
			p := path + "/" + escapePointer(k)
			switch {
			case inA:
				if !inB {
					bv = missing{}
				}
				diff(ops, p, ov, inO, bv, aval)
			case inO: // the Defaulter removed k
				*ops = append(*ops, patchOp{Op: "remove", Path: p})
			}
		}
		return
	case []any:
		ol, bl, ok := both[[]any](o, b)
		if !ok || len(ol) != len(bl) {
			break
		}
		src := sources(bl, av)
		if !inPlace(src, len(bl)) {
			// Elements were added, removed or moved: the list is replaced
			// whole, each element built on the request's element it came
			// from, so the fields T does not know move with it.
			*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: mergedList(ol, bl, av, src)})
			return
		}
		for i := range av {
			diff(ops, path+"/"+strconv.Itoa(i), ol[i], true, bl[i], av[i])
		}
		return
	}
	*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: a})
}

// merged returns the value o (present when inOrig) carrying the change
// from b to a: what diff's operations would make of it.
func merged(o any, inOrig bool, b, a any) any {
	if !inOrig {
		return a
	}
	if reflect.DeepEqual(b, a) {
		return o
	}
	switch av := a.(type) {
	case map[string]any:
		om, bm, ok := both[map[string]any](o, b)
		if !ok {
			break
		}
		out := make(map[string]any, len(om)+len(av))
		for k, v := range om {
			if _, inB := bm[k]; !inB {
				out[k] = v // unknown to T: kept
			}
		}
		for k, v := range av {
			bv, inB := bm[k]
			if !inB {
				bv = missing{}
			}
			ov, inO := om[k]
			out[k] = merged(ov, inO, bv, v)
		}
		return out
	case []any:
		ol, bl, ok := both[[]any](o, b)
		if !ok || len(ol) != len(bl) {
			break
		}
		return mergedList(ol, bl, av, sources(bl, av))
	}
	return a
}

// mergedList builds the list a: element i is the request's element src[i]
// (ol[src[i]], before defaulting bl[src[i]]) carrying its changes, or a's
// own when src[i] is -1 (an element the Defaulter added).
func mergedList(ol, bl, al []any, src []int) []any {
	out := make([]any, len(al))
	for i, av := range al {
		if j := src[i]; j >= 0 {
			out[i] = merged(ol[j], true, bl[j], av)
		} else {
			out[i] = av
		}
	}
	return out
}

// sources says where each element of al (the list after defaulting) comes
// from in bl (before), each element of bl used once: an element equal to
// it; else one with the same "name" (the key of most Kubernetes lists:
// containers, volumes, env), changed; else, when neither has a name, the
// element at its own index, changed in place; else -1 (added).
func sources(bl, al []any) []int {
	src := make([]int, len(al))
	used := make([]bool, len(bl))
	byValue := map[string][]int{} // bl's indexes by encoded element, in order
	for j, bv := range bl {
		k := encodedKey(bv)
		byValue[k] = append(byValue[k], j)
	}
	for i, av := range al {
		src[i] = -1
		k := encodedKey(av)
		if js := byValue[k]; len(js) > 0 {
			src[i], used[js[0]] = js[0], true
			byValue[k] = js[1:]
		}
	}
	byName := map[string]int{} // unused named elements of bl
	for j, bv := range bl {
		if n, ok := name(bv); ok && !used[j] {
			if _, dup := byName[n]; !dup {
				byName[n] = j
			}
		}
	}
	for i, av := range al {
		if src[i] != -1 {
			continue
		}
		if n, ok := name(av); ok {
			if j, found := byName[n]; found && !used[j] {
				src[i], used[j] = j, true
			}
			continue
		}
		if i < len(bl) && !used[i] {
			if _, named := name(bl[i]); !named {
				src[i], used[i] = i, true
			}
		}
	}
	return src
}

// name returns the "name" of v when v is an object that has one.
func name(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	n, ok := m["name"].(string)
	return n, ok
}

// inPlace reports whether every element of a list of n comes from its own
// index: the list kept its length and order.
func inPlace(src []int, n int) bool {
	if len(src) != n {
		return false
	}
	for i, j := range src {
		if i != j {
			return false
		}
	}
	return true
}

// encodedKey is v encoded as JSON (maps with sorted keys), so equal values
// get equal keys.
func encodedKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: v was decoded from JSON
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// both returns o and b as Ts, and whether both are: the value in the
// request and before defaulting have the shape of the value after.
func both[T any](o, b any) (T, T, bool) {
	ot, ok1 := o.(T)
	bt, ok2 := b.(T)
	return ot, bt, ok1 && ok2
}

// missing stands for a field absent before defaulting: it equals nothing.
type missing struct{}

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
