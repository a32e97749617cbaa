package informers

import (
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// ShardKey is the object field whose hash places an object in a bucket.
// The hash is FNV-1a 64 of the field's value (sharding.HashField), the one
// API servers evaluate shard selectors with (KEP-5866).
type ShardKey string

const (
	// ShardByUID spreads objects evenly, but a read by name cannot tell
	// the bucket of an object it has not seen.
	ShardByUID ShardKey = "object.metadata.uid"
	// ShardByNamespace keeps a namespace's objects in one bucket, so that a
	// read in a namespace knows its bucket; buckets are as even as the
	// namespaces are, and FNV-1a puts names that differ only at the end
	// close together: team-0 … team-99 fall into 2 of 32 buckets. Objects
	// of a cluster-scoped kind have no namespace: they all fall into the
	// bucket of "".
	ShardByNamespace ShardKey = "object.metadata.namespace"
)

// maxBuckets bounds Buckets.Count.
const maxBuckets = 4096

// Buckets cuts the 64-bit hash space of Key into Count equal, contiguous
// ranges (buckets 0..Count-1): bucket i holds the hashes h with
// floor(h*Count/2^64) == i. An object's UID and namespace never change, so
// an object never moves from one bucket to another.
type Buckets struct {
	// Key is the field hashed: ShardByUID or ShardByNamespace.
	Key ShardKey `json:"key"`
	// Count is the number of buckets, 1 to 4096.
	Count int `json:"count"`
}

// Validate reports a Key other than ShardByUID and ShardByNamespace, and
// a Count outside 1..4096.
func (b Buckets) Validate() error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("informers: %w", err)
	}
	return nil
}

func (b Buckets) validate() error {
	switch {
	case b.Key != ShardByUID && b.Key != ShardByNamespace:
		return fmt.Errorf("Buckets.Key %q is not %q or %q", b.Key, ShardByUID, ShardByNamespace)
	case b.Count < 1 || b.Count > maxBuckets:
		return fmt.Errorf("Buckets.Count %d is not in 1..%d", b.Count, maxBuckets)
	}
	return nil
}

// Of returns the bucket of a field value: floor(hash*Count/2^64).
func (b Buckets) Of(value string) int {
	hi, _ := bits.Mul64(fnv64a(value), uint64(b.Count))
	return int(hi)
}

// OfObject returns the bucket of obj: Of its UID or its namespace.
func (b Buckets) OfObject(obj metav1.Object) int {
	if b.Key == ShardByNamespace {
		return b.Of(obj.GetNamespace())
	}
	return b.Of(string(obj.GetUID()))
}

// Selector returns the shard selector of bucket, the range
// [ceil(bucket*2^64/Count), ceil((bucket+1)*2^64/Count)) of Key's hash:
// Selector(i) matches an object exactly when OfObject puts it in bucket i.
// It panics when b is not valid or bucket is not in 0..Count-1.
func (b Buckets) Selector(bucket int) sharding.Selector {
	if err := b.validate(); err != nil {
		panic(fmt.Sprintf("informers: Buckets.Selector(%d): %v", bucket, err))
	}
	if bucket < 0 || bucket >= b.Count {
		panic(fmt.Sprintf("informers: Buckets.Selector(%d): bucket is not in 0..%d", bucket, b.Count-1))
	}
	return sharding.NewSelector(sharding.ShardRangeRequirement{
		Key:   string(b.Key),
		Start: b.bound(bucket),
		End:   b.bound(bucket + 1),
	})
}

// hashSpace is 2^64, the end of the hash space.
var hashSpace = new(big.Int).Lsh(big.NewInt(1), 64)

// bound returns ceil(i*2^64/Count) as a shard range bound: "0x" and 16 hex
// digits, or "0x10000000000000000" for the end of the space.
func (b Buckets) bound(i int) string {
	if i == b.Count {
		return "0x1" + strings.Repeat("0", 16)
	}
	n := new(big.Int).Mul(big.NewInt(int64(i)), hashSpace)
	n.Add(n, big.NewInt(int64(b.Count-1)))
	n.Quo(n, big.NewInt(int64(b.Count)))
	return fmt.Sprintf("0x%016x", n.Uint64())
}

// fnv64a is sharding.HashField as a number, without its allocations.
func fnv64a(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// shardFilter is a shard selector compiled for matching objects without
// allocating: the field it hashes and its ranges.
type shardFilter struct {
	field  ShardKey
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
func compileShard(sel sharding.Selector) (*shardFilter, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs := sel.Requirements()
	f := &shardFilter{field: ShardKey(reqs[0].Key), ranges: make([]hashRange, 0, len(reqs))}
	if f.field != ShardByUID && f.field != ShardByNamespace {
		return nil, fmt.Errorf("shard key %q is not %q or %q", f.field, ShardByUID, ShardByNamespace)
	}
	for _, r := range reqs {
		if ShardKey(r.Key) != f.field {
			return nil, fmt.Errorf("shard keys %q and %q differ: a selector hashes one field", f.field, r.Key)
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
	h := fnv64a(v)
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
	if f.field == ShardByNamespace {
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
