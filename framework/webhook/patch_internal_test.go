package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// randomValue returns a random JSON value of at most depth levels: objects
// and lists of small sizes, strings, numbers, booleans and null.
func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(6)
	if depth == 0 {
		k = r.IntN(4)
	}
	switch k {
	case 0:
		return fmt.Sprintf("s%d", r.IntN(4))
	case 1:
		return float64(r.IntN(5))
	case 2:
		return r.IntN(2) == 0
	case 3:
		return nil
	case 4:
		m := map[string]any{}
		for range r.IntN(4) {
			m[fmt.Sprintf("k%d", r.IntN(5))] = randomValue(r, depth-1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomValue(r, depth-1)
		}
		return l
	}
}

// mutate returns a copy of v with random changes: values replaced, keys
// added and removed, list elements added, removed and moved.
func mutate(r *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			switch r.IntN(5) {
			case 0: // removed
			case 1:
				out[k] = randomValue(r, depth)
			default:
				out[k] = mutate(r, e, depth-1)
			}
		}
		if r.IntN(3) == 0 {
			out[fmt.Sprintf("n%d", r.IntN(3))] = randomValue(r, depth)
		}
		return out
	case []any:
		out := make([]any, 0, len(x)+1)
		for _, e := range x {
			if r.IntN(5) != 0 {
				out = append(out, mutate(r, e, depth-1))
			}
		}
		if r.IntN(3) == 0 {
			out = append(out, randomValue(r, depth))
		}
		if len(out) > 1 && r.IntN(3) == 0 {
			i, j := r.IntN(len(out)), r.IntN(len(out))
			out[i], out[j] = out[j], out[i]
		}
		if r.IntN(4) == 0 {
			out = append([]any{randomValue(r, depth)}, out...)
		}
		return out
	}
	if r.IntN(3) == 0 {
		return randomValue(r, depth)
	}
	return v
}

// TestJSONPatchProperties: for random documents and changes, the patch
// turns the document before defaulting into exactly the one after, and
// applies to a request's document that has more fields than the Go type
// knows, leaving those fields where the Go type's are untouched.
func TestJSONPatchProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		before := map[string]any{"spec": randomValue(r, 3)}
		after := mutate(r, before, 3)
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		patch, err := jsonPatch(b, b, a)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got := b
		if patch != nil {
			p, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				t.Fatalf("case %d: patch %s: %v", i, patch, err)
			}
			if got, err = p.Apply(b); err != nil {
				t.Fatalf("case %d: patch %s does not apply to %s: %v", i, patch, b, err)
			}
		}
		if !sameJSON(got, a) {
			t.Fatalf("case %d: patch %s turns\n%s\ninto\n%s\nwant\n%s", i, patch, b, got, a)
		}
		// The request's document: before with an unknown field added at
		// its top and in every object. The patch must apply to it.
		// The patch applies to it, and gives after once the unknown
		// fields are set aside.
		orig, _ := json.Marshal(withUnknown(before))
		patched := applied(t, orig, b, a)
		if known, _ := json.Marshal(withoutUnknown(patched)); !sameJSON(known, a) {
			t.Fatalf("case %d: the request's document\n%s\npatched is\n%s\nwant, unknown fields aside,\n%s", i, orig, known, a)
		}
	}
}

// TestJSONPatchListElementsKeepUnknownFields: whatever a Defaulter does to
// a list of objects (remove, add, move, as long as it leaves an element's
// own fields alone), each element that was in the request keeps its
// unknown field.
func TestJSONPatchListElementsKeepUnknownFields(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		var items []any
		for j := range r.IntN(5) {
			items = append(items, map[string]any{"name": fmt.Sprintf("e%d", j)})
		}
		var changed []any
		for _, it := range items {
			if r.IntN(4) != 0 {
				changed = append(changed, it)
			}
		}
		r.Shuffle(len(changed), func(x, y int) { changed[x], changed[y] = changed[y], changed[x] })
		for j := range r.IntN(3) {
			at := r.IntN(len(changed) + 1)
			changed = append(changed[:at], append([]any{map[string]any{"name": fmt.Sprintf("new%d", j)}}, changed[at:]...)...)
		}
		b, _ := json.Marshal(map[string]any{"list": items})
		a, _ := json.Marshal(map[string]any{"list": changed})
		orig, _ := json.Marshal(withUnknown(map[string]any{"list": items}))
		got := applied(t, orig, b, a).(map[string]any)["list"]
		list, _ := got.([]any)
		for _, e := range list {
			m := e.(map[string]any)
			if isNew := m["name"].(string)[0] == 'n'; isNew == (m["zz-unknown"] != nil) {
				t.Fatalf("case %d: %s becomes %s (element %v)", i, orig, a, m)
			}
		}
	}
}

// applied returns orig with the patch from before to after applied,
// decoded.
func applied(t *testing.T, orig, before, after []byte) any {
	t.Helper()
	patch, err := jsonPatch(orig, before, after)
	if err != nil {
		t.Fatal(err)
	}
	out := orig
	if patch != nil {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("patch %s: %v", patch, err)
		}
		if out, err = p.Apply(orig); err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", patch, orig, err)
		}
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// withoutUnknown returns a copy of v without the key "zz-unknown".
func withoutUnknown(v any) any {
	return eachObject(v, func(m map[string]any) { delete(m, "zz-unknown") })
}

// sameJSON reports whether x and y encode the same value (json-patch's
// Equal fails on nulls in lists).
func sameJSON(x, y []byte) bool {
	var vx, vy any
	return json.Unmarshal(x, &vx) == nil && json.Unmarshal(y, &vy) == nil && reflect.DeepEqual(vx, vy)
}

// withUnknown returns a copy of v with the key "zz-unknown" added to every
// object.
func withUnknown(v any) any {
	return eachObject(v, func(m map[string]any) { m["zz-unknown"] = "u" })
}

// eachObject returns a deep copy of v in which edit has changed every
// object.
func eachObject(v any, edit func(map[string]any)) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = eachObject(e, edit)
		}
		edit(out)
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = eachObject(e, edit)
		}
		return out
	}
	return v
}

// TestJSONPatchLeavesTheEncodingsZeroValuesOut: T's encoding carries
// fields the request lacks (an empty metadata, a struct without
// omitempty). The patch adds only what the Defaulter changed, never those.
func TestJSONPatchLeavesTheEncodingsZeroValuesOut(t *testing.T) {
	for _, c := range []struct{ name, orig, before, after, want string }{
		{"untouched zero structs", `{"spec":{}}`,
			`{"metadata":{},"spec":{"paint":{},"teeth":0}}`,
			`{"metadata":{},"spec":{"paint":{},"teeth":12}}`,
			`[{"op":"add","path":"/spec/teeth","value":12}]`},
		{"a field set inside a zero struct", `{"spec":{}}`,
			`{"metadata":{},"spec":{"paint":{"color":""}}}`,
			`{"metadata":{},"spec":{"paint":{"color":"red"}}}`,
			`[{"op":"add","path":"/spec/paint","value":{"color":"red"}}]`},
		{"a label on an empty metadata", `{}`,
			`{"metadata":{}}`,
			`{"metadata":{"labels":{"a":"b"}}}`,
			`[{"op":"add","path":"/metadata","value":{"labels":{"a":"b"}}}]`},
		{"an untouched null", `{"spec":{}}`,
			`{"spec":{"backup":null,"teeth":0}}`,
			`{"spec":{"backup":null,"teeth":12}}`,
			`[{"op":"add","path":"/spec/teeth","value":12}]`},
		{"a struct where T had a null", `{"spec":{}}`,
			`{"spec":{"backup":null}}`,
			`{"spec":{"backup":{"schedule":"daily"}}}`,
			`[{"op":"add","path":"/spec/backup","value":{"schedule":"daily"}}]`},
		{"nothing changed", `{"spec":{}}`, `{"metadata":{},"spec":{"paint":{}}}`, `{"metadata":{},"spec":{"paint":{}}}`, ``},
	} {
		patch, err := jsonPatch([]byte(c.orig), []byte(c.before), []byte(c.after))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(patch) != c.want {
			t.Errorf("%s: patch %s, want %s", c.name, patch, c.want)
		}
	}
}

// TestJSONPatchChangedElementsOfAResizedListKeepUnknownFields: a Defaulter
// that changes an element of a list without keys and also adds, removes
// or moves others: the changed element keeps the fields T does not know
// (here timeout), and an added one gets none.
func TestJSONPatchChangedElementsOfAResizedListKeepUnknownFields(t *testing.T) {
	for _, c := range []struct{ name, orig, before, after, want string }{
		{"changed and appended",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":5}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"TCP"},{"port":443,"protocol":"TCP"}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"TCP","timeout":5},{"port":443,"protocol":"TCP"}]}}`},
		{"changed and prepended",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":5}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":443,"protocol":"TCP"},{"port":80,"protocol":"TCP"}]}}`,
			`{"spec":{"rules":[{"port":443,"protocol":"TCP"},{"port":80,"protocol":"TCP","timeout":5}]}}`},
		{"one of many changed, another removed",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":1},{"port":81,"protocol":"tcp","timeout":2},{"port":82,"protocol":"tcp","timeout":3}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"},{"port":81,"protocol":"tcp"},{"port":82,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"},{"port":82,"protocol":"UDP"}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":1},{"port":82,"protocol":"UDP","timeout":3}]}}`},
		{"sorted and changed",
			`{"spec":{"rules":[{"port":90,"protocol":"tcp","timeout":9},{"port":70,"protocol":"udp","timeout":7},{"port":80,"protocol":"tcp","timeout":8}]}}`,
			`{"spec":{"rules":[{"port":90,"protocol":"tcp"},{"port":70,"protocol":"udp"},{"port":80,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":70,"protocol":"udp"},{"port":80,"protocol":"TCP"},{"port":90,"protocol":"TCP"}]}}`,
			`{"spec":{"rules":[{"port":70,"protocol":"udp","timeout":7},{"port":80,"protocol":"TCP","timeout":8},{"port":90,"protocol":"TCP","timeout":9}]}}`},
		{"deduplicated and changed",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":1},{"port":80,"protocol":"tcp","timeout":2},{"port":90,"protocol":"udp","timeout":3}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"},{"port":80,"protocol":"tcp"},{"port":90,"protocol":"udp"}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"TCP"},{"port":90,"protocol":"udp"}]}}`,
			// T cannot tell the two elements 80 apart: the first is kept.
			`{"spec":{"rules":[{"port":80,"protocol":"TCP","timeout":1},{"port":90,"protocol":"udp","timeout":3}]}}`},
		{"as close to two elements",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":1},{"port":81,"protocol":"tcp","timeout":2}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"},{"port":81,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":82,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":82,"protocol":"tcp"}]}}`},
		{"replaced by an unrelated element and appended",
			`{"spec":{"rules":[{"port":80,"protocol":"tcp","timeout":5}]}}`,
			`{"spec":{"rules":[{"port":80,"protocol":"tcp"}]}}`,
			`{"spec":{"rules":[{"port":443,"protocol":"udp"},{"port":8443,"protocol":"udp"}]}}`,
			`{"spec":{"rules":[{"port":443,"protocol":"udp"},{"port":8443,"protocol":"udp"}]}}`},
	} {
		got, _ := json.Marshal(applied(t, []byte(c.orig), []byte(c.before), []byte(c.after)))
		if !sameJSON(got, []byte(c.want)) {
			t.Errorf("%s: the request's document\n%s\nis patched into\n%s\nwant\n%s", c.name, c.orig, got, c.want)
		}
	}
}

// TestWithoutZerosFollowsEncodingJSON: the fields of a value the
// Defaulter added are found as encoding/json names them (embedded
// structs' promoted, the outer field first), and values with their own
// encoding, and maps' keys, are kept.
func TestWithoutZerosFollowsEncodingJSON(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type base struct {
		Shadowed string `json:"x"`
		B        int    `json:"b"`
		In       inner  `json:"in"`
	}
	type outer struct {
		base  `json:",inline"`
		X     inner            `json:"x"`
		M     map[string]int   `json:"m"`
		L     []inner          `json:"l"`
		Raw   json.RawMessage  `json:"raw"`
		Inner map[string]inner `json:"inner"`
	}
	v := map[string]any{
		"b": json.Number("0"), "in": map[string]any{"n": json.Number("1")},
		"x":     map[string]any{"n": json.Number("0"), "extra": json.Number("1")},
		"m":     map[string]any{"a": json.Number("0")},
		"l":     []any{map[string]any{"n": json.Number("0")}, map[string]any{"n": json.Number("2")}},
		"raw":   map[string]any{"n": json.Number("0")},
		"inner": map[string]any{"k": map[string]any{"n": json.Number("0")}},
	}
	got, _ := json.Marshal(withoutZeros(v, reflect.TypeFor[*outer]()))
	want := `{"in":{"n":1},"inner":{"k":{}},"l":[{},{"n":2}],"m":{"a":0},"raw":{"n":0},"x":{"extra":1}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
