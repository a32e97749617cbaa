package webhook

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// node is one value of a random document as the property test knows it:
// what T encodes, the fields T does not know that the request adds to
// every object, and which element of the request each element after
// defaulting really is.
type node struct {
	id     int              // identity: an object's unknown fields name it
	fields map[string]*node // an object's fields T knows; nil for other values
	omit   bool             // an omitzero struct: T omits it while it has no fields
	fixed  string           // a list element's field the Defaulter never changes
	list   listKind         // a list's kind, or notList
	items  []*node          // a list's elements
	val    any              // a scalar
}

type listKind int

const (
	notList listKind = iota
	keyless          // objects (each with a unique "i") and unique strings
	keyed            // objects with a unique "name"
	numbers          // small numbers, repeated
)

func (n *node) emptyOmitted() bool { return n.fields != nil && n.omit && len(n.fields) == 0 }

// typed is n as T encodes it.
func (n *node) typed() any {
	switch {
	case n.fields != nil:
		m := map[string]any{}
		for k, c := range n.fields {
			if !c.emptyOmitted() {
				m[k] = c.typed()
			}
		}
		return m
	case n.list != notList:
		return each(n.items, (*node).typed)
	}
	return n.val
}

// raw is n as the request carries it: each object with the fields T does
// not know, deep ones too, and omitted structs holding only those.
func (n *node) raw() any {
	switch {
	case n.fields != nil:
		m := unknownFields(n.id)
		for k, c := range n.fields {
			m[k] = c.raw()
		}
		return m
	case n.list != notList:
		return each(n.items, (*node).raw)
	}
	return n.val
}

// each returns f of every node of items.
func each(items []*node, f func(*node) any) []any {
	l := []any{}
	for _, it := range items {
		l = append(l, f(it))
	}
	return l
}

// unknownFields are the fields T does not know of the object with id.
func unknownFields(id int) map[string]any {
	m := map[string]any{"zz-id": id}
	if id%3 == 0 {
		m["zz-deep"] = map[string]any{"l": []any{id, map[string]any{"x": id}}}
	}
	return m
}

// gen makes random documents and random Defaulters' changes to them.
type gen struct {
	r    *rand.Rand
	last int
}

func (g *gen) id() int { g.last++; return g.last }

func (g *gen) value(depth int) *node {
	k := g.r.IntN(8)
	if depth <= 0 {
		k = g.r.IntN(3)
	}
	switch k {
	case 0:
		return &node{id: g.id(), val: fmt.Sprintf("s%d", g.last)}
	case 1:
		return &node{id: g.id(), val: g.r.IntN(3)}
	case 2:
		return &node{id: g.id(), val: []any{true, false, nil}[g.r.IntN(3)]}
	case 3, 4:
		return g.object(depth)
	case 5:
		return g.newList(keyless, depth)
	case 6:
		return g.newList(keyed, depth)
	default:
		return g.newList(numbers, depth)
	}
}

// object returns a struct of random fields; a quarter have none, so that
// an omitzero one holds only fields T does not know.
func (g *gen) object(depth int) *node {
	n := &node{id: g.id(), fields: map[string]*node{}, omit: g.r.IntN(2) == 0}
	if g.r.IntN(4) != 0 {
		for range g.r.IntN(4) {
			n.fields[fmt.Sprintf("f%d", g.r.IntN(5))] = g.value(depth - 1)
		}
	}
	return n
}

func (g *gen) newList(k listKind, depth int) *node {
	n := &node{id: g.id(), list: k}
	for range g.r.IntN(4) {
		n.items = append(n.items, g.element(k, depth-1))
	}
	return n
}

// element returns a new element for a list of kind k.
func (g *gen) element(k listKind, depth int) *node {
	switch {
	case k == numbers:
		return &node{id: g.id(), val: g.r.IntN(3)}
	case k == keyless && g.r.IntN(4) == 0:
		return &node{id: g.id(), val: fmt.Sprintf("e%d", g.last)}
	}
	e := g.object(depth)
	e.omit = false
	e.fixed = "i"
	if k == keyed {
		e.fixed = "name"
	}
	e.fields[e.fixed] = &node{id: g.id(), val: fmt.Sprintf("%s%d", e.fixed, g.last)}
	return e
}

// edit returns a copy of n changed as a Defaulter might: fields set,
// replaced, removed (a whole omitzero struct too) and added, also inside
// structs T omitted; list elements changed, prepended, appended, dropped,
// replaced and reordered, often several at once. What stays the same
// element keeps its id.
func (g *gen) edit(n *node, depth int) *node {
	out := *n
	switch {
	case n.fields != nil:
		out.fields = map[string]*node{}
		for _, k := range slices.Sorted(maps.Keys(n.fields)) {
			c := n.fields[k]
			if k == n.fixed {
				out.fields[k] = c
				continue
			}
			switch g.r.IntN(8) {
			case 0: // removed
			case 1:
				out.fields[k] = g.value(depth)
			case 2, 3, 4:
				out.fields[k] = g.edit(c, depth-1)
			default:
				out.fields[k] = c
			}
		}
		if g.r.IntN(3) == 0 || (len(n.fields) == 0 && g.r.IntN(3) != 0) {
			if k := fmt.Sprintf("g%d", g.r.IntN(3)); out.fields[k] == nil {
				out.fields[k] = g.value(depth)
			}
		}
	case n.list != notList:
		items := slices.Clone(n.items)
		if g.r.IntN(2) == 0 {
			for i, it := range items {
				switch {
				case g.r.IntN(2) == 0:
				case it.fields != nil:
					items[i] = g.edit(it, depth-1)
				case n.list == numbers:
					items[i] = &node{id: it.id, val: g.r.IntN(3)}
				}
			}
		}
		if len(items) > 0 && g.r.IntN(4) == 0 {
			from := g.r.IntN(len(items))
			items = slices.Delete(items, from, from+1+g.r.IntN(len(items)-from))
		}
		if len(items) > 0 && g.r.IntN(6) == 0 {
			items[g.r.IntN(len(items))] = g.element(n.list, depth-1)
		}
		if g.r.IntN(4) == 0 {
			items = append([]*node{g.element(n.list, depth-1)}, items...)
		}
		if g.r.IntN(4) == 0 {
			items = append(items, g.element(n.list, depth-1))
		}
		if g.r.IntN(4) == 0 {
			g.r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		}
		out.items = items
	default:
		if g.r.IntN(2) == 0 {
			return g.value(depth)
		}
	}
	return &out
}

// want is the request's document b once patched, as the package doc
// promises, after the Defaulter turned it into a: T's encoding of a, with
// the fields T does not know of each object of b on the object of a that
// is the same field, or the same list element.
func want(a, b *node) any {
	if b != nil && reflect.DeepEqual(a.typed(), b.typed()) {
		return b.raw()
	}
	switch {
	case a.fields != nil:
		if b == nil || b.fields == nil {
			return a.typed()
		}
		out := unknownFields(b.id)
		for _, k := range slices.Sorted(maps.Keys(union(a.fields, b.fields))) {
			ac, bc := a.fields[k], b.fields[k]
			switch {
			case ac != nil && !ac.emptyOmitted():
				out[k] = want(ac, bc)
			case bc != nil && bc.emptyOmitted(): // T knew nothing there, before or after
				out[k] = bc.raw()
			}
		}
		return out
	case a.list != notList:
		if b == nil || b.list == notList {
			return a.typed()
		}
		src := sameElements(a, b)
		out := []any{}
		for i, it := range a.items {
			if j := src[i]; j >= 0 {
				out = append(out, want(it, b.items[j]))
			} else {
				out = append(out, it.typed())
			}
		}
		return out
	}
	return a.typed()
}

// sameElements says, for each element of the list a, which element of b
// it keeps the unknown fields of, or -1: in a list with keys, the element
// it is; in one without, the element it is when unchanged or when it only
// gained fields, and else, when the list kept its length and those
// elements their places, the element at its index (which a Defaulter that
// replaced or moved elements and changed them too may not mean: it cannot
// be told apart), or else the element it is when the two are each other's
// closest.
func sameElements(a, b *node) []int {
	src := make([]int, len(a.items))
	used := make([]bool, len(b.items))
	for i, ai := range a.items {
		src[i] = -1
		for j, bj := range b.items {
			if bj.id != ai.id || a.list == numbers {
				continue
			}
			at, bt := ai.typed(), bj.typed()
			if named(ai) || reflect.DeepEqual(at, bt) || (ai.fields != nil && keepsAll(at, bt)) {
				src[i], used[j] = j, true
			}
		}
	}
	if inPlace(src, len(b.items)) {
		for i := range src {
			if src[i] == -1 && !used[i] && !named(a.items[i]) && !named(b.items[i]) {
				src[i] = i
			}
		}
		return src
	}
	// Else an element the Defaulter changed keeps the unknown fields of
	// the element it is when the two are each other's closest (see
	// closest): only then, never those of another element.
	var open []int
	for i, it := range a.items {
		if src[i] == -1 && !named(it) {
			open = append(open, i)
		}
	}
	al, bl := each(a.items, (*node).typed), each(b.items, (*node).typed)
	likely := slices.Clone(src)
	closest(al, bl, open, likely, slices.Clone(used))
	for _, i := range open {
		if j := likely[i]; j != -1 && a.items[i].id == b.items[j].id && a.list != numbers {
			src[i] = j
		}
	}
	return src
}

// named reports whether n is an element of a list with keys.
func named(n *node) bool { return n.fields != nil && n.fixed == "name" }

func union(x, y map[string]*node) map[string]*node {
	out := maps.Clone(x)
	maps.Copy(out, y)
	return out
}

// TestJSONPatchKeepsUnknownFieldsProperty: for random documents whose
// every object (list elements, omitzero structs holding nothing else, the
// top) carries fields T does not know, and random Defaulters' changes, the
// patch gives exactly T's encoding after defaulting with the request's
// unknown fields where they were: none dropped, none moved onto another
// element (see want).
func TestJSONPatchKeepsUnknownFieldsProperty(t *testing.T) {
	g := &gen{r: rand.New(rand.NewPCG(26, 6))}
	var kept, patched int
	for i := range 4000 {
		before := g.object(5)
		before.omit = false
		after := g.edit(before, 5)
		orig, _ := json.Marshal(before.raw())
		b, _ := json.Marshal(before.typed())
		a, _ := json.Marshal(after.typed())
		w, _ := json.Marshal(want(after, before))
		got, _ := json.Marshal(applied(t, orig, b, a))
		if !sameJSON(got, w) {
			t.Fatalf("case %d: T's encoding\n%s\nbecomes\n%s\nthe request's document\n%s\nis patched into\n%s\nwant\n%s", i, b, a, orig, got, w)
		}
		if !sameJSON(b, a) {
			patched++
			var v any
			_ = json.Unmarshal(w, &v)
			kept += len(markers(v))
		}
	}
	if patched < 2500 || kept < patched {
		t.Fatalf("the cases are too tame: %d of 4000 patched, %d unknown fields kept", patched, kept)
	}
}

// markers returns the ids of the objects in v that carry unknown fields.
func markers(v any) []any {
	var out []any
	eachObject(v, func(m map[string]any) {
		if id, ok := m["zz-id"]; ok {
			out = append(out, id)
		}
	})
	return out
}
