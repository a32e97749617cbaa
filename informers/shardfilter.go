package informers

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"

	"github.com/converge-dev/converge/sharding"
)

// shardFilter is a shard selector compiled for matching objects without
// allocating: the field it hashes and its ranges.
type shardFilter struct {
	field  sharding.Field
	ranges []hashRange
}

// hashRange is [lo, hi) of the hash space, with end for hi == 2^64.
type hashRange struct {
	lo, hi uint64
	end    bool
}

// compileShard checks sel (as API servers do: one key, one of the two
// fields, bounds of "0x" and 16 lowercase hex digits, or 2^64 as
// "0x10000000000000000") and compiles it; nil when sel selects everything.
func compileShard(sel apisharding.Selector) (*shardFilter, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs := sel.Requirements()
	f := &shardFilter{field: sharding.Field(reqs[0].Key), ranges: make([]hashRange, 0, len(reqs))}
	if f.field != sharding.ByUID && f.field != sharding.ByNamespace {
		return nil, fmt.Errorf("shard field %q is not %q or %q", f.field, sharding.ByUID, sharding.ByNamespace)
	}
	for _, r := range reqs {
		if sharding.Field(r.Key) != f.field {
			return nil, fmt.Errorf("shard fields %q and %q differ: a selector hashes one field", f.field, r.Key)
		}
		lo, loEnd, err := parseBound(r.Start)
		if err != nil {
			return nil, fmt.Errorf("start of %s: %w", r.Key, err)
		}
		hi, hiEnd, err := parseBound(r.End)
		if err != nil {
			return nil, fmt.Errorf("end of %s: %w", r.Key, err)
		}
		if loEnd {
			continue // an empty range
		}
		f.ranges = append(f.ranges, hashRange{lo: lo, hi: hi, end: hiEnd})
	}
	return f, nil
}

// parseBound reads a range bound; end reports 2^64.
func parseBound(s string) (n uint64, end bool, err error) {
	if s == "0x1"+strings.Repeat("0", 16) {
		return 0, true, nil
	}
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) != 16 || strings.ToLower(digits) != digits {
		return 0, false, fmt.Errorf("bound %q is not 0x and 16 lowercase hex digits", s)
	}
	n, err = strconv.ParseUint(digits, 16, 64)
	if err != nil {
		return 0, false, fmt.Errorf("bound %q: %w", s, err)
	}
	return n, false, nil
}

// matchesValue reports whether a field value hashes into f's ranges.
func (f *shardFilter) matchesValue(v string) bool {
	h := sharding.Hash(v)
	for _, r := range f.ranges {
		if h >= r.lo && (r.end || h < r.hi) {
			return true
		}
	}
	return false
}

// matches reports whether obj is in f's ranges; objects without metadata
// are not.
func (f *shardFilter) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return f.matchesMeta(m.GetNamespace(), string(m.GetUID()))
}

// matchesMeta reports whether an object of that namespace and UID is in
// f's ranges.
func (f *shardFilter) matchesMeta(namespace, uid string) bool {
	if f.field == sharding.ByNamespace {
		return f.matchesValue(namespace)
	}
	return f.matchesValue(uid)
}

// overlaps reports whether an object can be in both f and g: they hash
// different fields, or two of their ranges meet.
func (f *shardFilter) overlaps(g *shardFilter) bool {
	if f.field != g.field {
		return true
	}
	for _, a := range f.ranges {
		for _, b := range g.ranges {
			if (b.end || a.lo < b.hi) && (a.end || b.lo < a.hi) {
				return true
			}
		}
	}
	return false
}

// keep appends the items f matches to into and returns it.
func (f *shardFilter) keep(items, into []runtime.Object) []runtime.Object {
	for _, it := range items {
		if f.matches(it) {
			into = append(into, it)
		}
	}
	return into
}

// filterList removes the items of list outside f's ranges.
func (f *shardFilter) filterList(list runtime.Object) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := f.keep(items, items[:0])
	if len(kept) == len(items) {
		return nil
	}
	return meta.SetList(list, kept)
}
