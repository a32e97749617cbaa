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
// Arrays whose length changed are replaced whole.
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
		om, ok1 := o.(map[string]any)
		bm, ok2 := b.(map[string]any)
		if !ok1 || !ok2 {
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
		ol, ok1 := o.([]any)
		bl, ok2 := b.([]any)
		if !ok1 || !ok2 || len(ol) != len(bl) || len(bl) != len(av) {
			break
		}
		for i := range av {
			diff(ops, path+"/"+strconv.Itoa(i), ol[i], true, bl[i], av[i])
		}
		return
	}
	*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: a})
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
