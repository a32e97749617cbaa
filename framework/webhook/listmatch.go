package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
)

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
