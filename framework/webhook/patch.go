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

// sources says which element of bl (the list before defaulting) each
// element of al (after) comes from, each element of bl used at most once,
// or -1 for an element the Defaulter added or one nothing identifies:
//
//  1. an element of bl equal to it (unchanged, perhaps moved);
//  2. else, when it has a "name" (the key of most Kubernetes lists:
//     containers, volumes, env), the element of bl with that name;
//  3. else the one unnamed element of bl whose every value it keeps (the
//     Defaulter added fields to it), if no other element of al keeps all
//     of that element's values;
//  4. else, when the list kept its length and every element found so far
//     its place, the unnamed element at its own index (changed in place);
//  5. else (the list grew, shrank or was reordered, and the Defaulter
//     changed elements too: appended one and modified another, sorted and
//     modified, deduplicated and modified), the unused unnamed element of
//     bl that is most like it, when each is the other's closest: they
//     differ in the fewest keys (a key only one has, or one of another
//     value), they have at least one key of the same value and no fewer
//     keys of the same value than of others, and no other element is as
//     close (elements equal to T, duplicates, tie for the first one).
//
// An element found by none of these is the Defaulter's alone: the request's
// fields T does not know are never put onto another element that nothing
// tells apart from it. Rule 5 does not guess: an element that changed in
// more of its keys than it kept, or that is as close to two elements of
// bl (or one of bl as close to two of al), gets no fields but its own. It
// is what keeps a list keyed by other fields than "name" (the CRD's
// list-map keys, which T does not carry) in the common edits, as long as
// the Defaulter changes fewer fields of an element than it keeps.
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
	var open []int // unnamed elements of al found by neither
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
		open = append(open, i)
	}
	// 3: pairs (i, j) where al[i] keeps all of bl[j], unique both ways.
	keeps := map[int][]int{} // open i → unused unnamed j it keeps
	keptBy := map[int]int{}  // j → how many open i keep it
	for _, i := range open {
		if _, ok := al[i].(map[string]any); !ok {
			continue
		}
		for j, bv := range bl {
			if _, named := name(bv); !named && !used[j] && keepsAll(al[i], bv) {
				keeps[i] = append(keeps[i], j)
				keptBy[j]++
			}
		}
	}
	for _, i := range open {
		if js := keeps[i]; len(js) == 1 && keptBy[js[0]] == 1 {
			src[i], used[js[0]] = js[0], true
		}
	}
	if inPlace(src, len(bl)) {
		for _, i := range open {
			if _, named := name(bl[i]); src[i] == -1 && !used[i] && !named {
				src[i], used[i] = i, true
			}
		}
		return src
	}
	closest(al, bl, open, src, used)
	return src
}

// inPlace reports whether src (of a list of n elements before) keeps the
// list's length and every element found its index.
func inPlace(src []int, n int) bool {
	if len(src) != n {
		return false
	}
	for i, j := range src {
		if j != -1 && j != i {
			return false
		}
	}
	return true
}

// closest finds the sources of the open elements of al still unfound
// (src -1) among the unused unnamed objects of bl by likeness (rule 5 of
// sources): an object of al and one of bl that are each other's closest
// (fewest keys whose values differ), of those that keep at least half of
// each other's keys (more keys of equal values than of other ones, or as
// many, and at least one). Objects that tie are not told apart, unless
// they are equal (duplicates to T): then the first.
func closest(al, bl []any, open, src []int, used []bool) {
	type pair struct{ i, j, differ int }
	var candidates []int // the unused unnamed objects of bl
	for j, bv := range bl {
		if _, ok := bv.(map[string]any); ok && !used[j] {
			if _, named := name(bv); !named {
				candidates = append(candidates, j)
			}
		}
	}
	byI, byJ := map[int][]pair{}, map[int][]pair{} // the pairs of each element of al, of bl
	for _, i := range open {
		am, ok := al[i].(map[string]any)
		if !ok || src[i] != -1 {
			continue
		}
		for _, j := range candidates {
			if equal, differ := likeness(am, bl[j].(map[string]any)); equal > 0 && equal >= differ {
				p := pair{i, j, differ}
				byI[i], byJ[j] = append(byI[i], p), append(byJ[j], p)
			}
		}
	}
	// best returns the closest other end of pairs (of one element), the
	// first of those equal to it when several tie, or -1 when others tie.
	best := func(pairs []pair, other func(pair) int, list []any) int {
		found, min, tied := -1, 0, false
		for _, p := range pairs {
			switch o := other(p); {
			case found == -1 || p.differ < min:
				found, min, tied = o, p.differ, false
			case p.differ == min && !reflect.DeepEqual(list[o], list[found]):
				tied = true
			}
		}
		if tied {
			return -1
		}
		return found
	}
	pi := func(p pair) int { return p.i }
	pj := func(p pair) int { return p.j }
	for _, i := range open {
		if src[i] != -1 {
			continue
		}
		if j := best(byI[i], pj, bl); j != -1 && !used[j] && best(byJ[j], pi, al) == i {
			src[i], used[j] = j, true
		}
	}
}

// likeness counts the keys of a and b whose values are equal, and those
// that differ or that only one has; it stops counting, with differ over
// equal, once the keys that differ outnumber the equal ones there can be.
func likeness(a, b map[string]any) (equal, differ int) {
	common := 0 // keys both have
	for k, av := range a {
		bv, ok := b[k]
		if ok {
			common++
			if same(av, bv) {
				equal++
				continue
			}
		}
		if differ++; 2*differ > len(a) { // the others of a, all equal, are fewer
			return equal, differ
		}
	}
	return equal, differ + len(b) - common
}

// same reports whether the decoded JSON values x and y are equal, quickly
// for scalars.
func same(x, y any) bool {
	switch xv := x.(type) {
	case string:
		yv, ok := y.(string)
		return ok && xv == yv
	case json.Number:
		yv, ok := y.(json.Number)
		return ok && xv == yv
	case bool:
		yv, ok := y.(bool)
		return ok && xv == yv
	case nil:
		return y == nil
	}
	return reflect.DeepEqual(x, y)
}

// keepsAll reports whether a holds every value of b: b's keys with values
// a keeps, b's list element by element, or b itself.
func keepsAll(a, b any) bool {
	switch bv := b.(type) {
	case map[string]any:
		am, ok := a.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range bv {
			if av, ok := am[k]; !ok || !keepsAll(av, v) {
				return false
			}
		}
		return true
	case []any:
		al, ok := a.([]any)
		if !ok || len(al) != len(bv) {
			return false
		}
		for i := range bv {
			if !keepsAll(al[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
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

// encodedKey is v encoded as JSON (maps with sorted keys), so equal values
// get equal keys.
func encodedKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: v was decoded from JSON
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
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
