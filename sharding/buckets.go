package sharding

import (
	"fmt"
	"math/big"
	"math/bits"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
)

// Field is the object field whose hash places an object in a bucket. Its
// values are the field paths of KEP-5866 shard selectors, which API
// servers evaluate.
type Field string

const (
	// ByUID spreads objects evenly, but a read by name cannot tell the
	// bucket of an object it has not seen.
	ByUID Field = "object.metadata.uid"
	// ByNamespace keeps a namespace's objects in one bucket, so that a
	// read in a namespace knows its bucket; buckets are as even as the
	// namespaces are, and FNV-1a puts names that differ only at the end
	// close together: team-0 … team-99 fall into 2 of 32 buckets. Objects
	// of a cluster-scoped kind have no namespace: they all fall into the
	// bucket of "".
	ByNamespace Field = "object.metadata.namespace"
)

// ParseField returns the Field a command-line word names: "uid" (ByUID)
// or "namespace" (ByNamespace); "" means ByUID.
func ParseField(word string) (Field, error) {
	switch word {
	case "", "uid":
		return ByUID, nil
	case "namespace":
		return ByNamespace, nil
	}
	return "", fmt.Errorf(`sharding: field %q: want "uid" or "namespace"`, word)
}

// maxBuckets bounds Buckets.Count.
const maxBuckets = 4096

// Buckets cuts the 64-bit hash space of the field By into Count equal,
// contiguous ranges (buckets 0..Count-1): bucket i holds the hashes h with
// floor(h*Count/2^64) == i.
type Buckets struct {
	// By is the field hashed: ByUID or ByNamespace. In Options, zero means
	// ByUID.
	By Field `json:"by"`
	// Count is the number of buckets, 1 to 4096. In Options, zero means 32.
	Count int `json:"count"`
}

// Validate reports a By other than ByUID and ByNamespace, and a Count
// outside 1..4096.
func (b Buckets) Validate() error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("sharding: %w", err)
	}
	return nil
}

func (b Buckets) validate() error {
	switch {
	case b.By != ByUID && b.By != ByNamespace:
		return fmt.Errorf("Buckets.By %q is not %q or %q", b.By, ByUID, ByNamespace)
	case b.Count < 1 || b.Count > maxBuckets:
		return fmt.Errorf("Buckets.Count %d is not in 1..%d", b.Count, maxBuckets)
	}
	return nil
}

// Of returns the bucket of a field value: floor(Hash(value)*Count/2^64).
func (b Buckets) Of(value string) int {
	hi, _ := bits.Mul64(Hash(value), uint64(b.Count))
	return int(hi)
}

// OfObject returns the bucket of obj: Of its UID or its namespace.
func (b Buckets) OfObject(obj metav1.Object) int {
	if b.By == ByNamespace {
		return b.Of(obj.GetNamespace())
	}
	return b.Of(string(obj.GetUID()))
}

// Selector returns the shard selector of bucket, the range
// [ceil(bucket*2^64/Count), ceil((bucket+1)*2^64/Count)) of By's hash:
// Selector(i) matches an object exactly when OfObject puts it in bucket i.
// It panics when b is not valid or bucket is not in 0..Count-1.
func (b Buckets) Selector(bucket int) apisharding.Selector {
	if err := b.validate(); err != nil {
		panic(fmt.Sprintf("sharding: Buckets.Selector(%d): %v", bucket, err))
	}
	if bucket < 0 || bucket >= b.Count {
		panic(fmt.Sprintf("sharding: Buckets.Selector(%d): bucket is not in 0..%d", bucket, b.Count-1))
	}
	return apisharding.NewSelector(apisharding.ShardRangeRequirement{
		Key:   string(b.By),
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

// Hash is the FNV-1a 64 hash of a field value, the hash shard selectors
// range over (k8s.io/apimachinery's sharding.HashField as a number,
// without its allocations).
func Hash(value string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(value); i++ {
		h ^= uint64(value[i])
		h *= prime
	}
	return h
}
