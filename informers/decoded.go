package informers

import (
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
)

// decodedCache keeps recently decoded objects of one compact kind, by their
// record: a record is never changed (an update stores a new one), so a hit
// is always current. It is split in shards, each with its own lock, so that
// workers reading at once rarely wait for one another; each shard lets go
// of the least recently used with the CLOCK algorithm.
type decodedCache struct {
	shards []decodedShard
}

type decodedShard struct {
	mu sync.Mutex
	// slots, at, hand and max are guarded by mu: at maps a record to
	// its slot, hand is where the clock's hand stands, max the most
	// slots.
	slots []decodedSlot
	at    map[*compactObject]int
	hand  int
	max   int
}

type decodedSlot struct {
	rec *compactObject
	obj runtime.Object
	// used is set by each hit and cleared as the hand passes.
	used bool
}

// newDecodedCache returns a cache of about n objects (n > 0).
func newDecodedCache(n int) *decodedCache {
	shards := 16
	if n < 64 {
		shards = 1
	}
	d := &decodedCache{shards: make([]decodedShard, shards)}
	for i := range d.shards {
		d.shards[i].max = max(1, (n+shards-1)/shards)
		d.shards[i].at = map[*compactObject]int{}
	}
	return d
}

func (d *decodedCache) shard(r *compactObject) *decodedShard {
	p := uint64(uintptr(unsafe.Pointer(r)))
	p ^= p >> 17
	p *= 0x9E3779B97F4A7C15
	return &d.shards[(p>>32)%uint64(len(d.shards))]
}

// get returns r's decoded object, if kept.
func (d *decodedCache) get(r *compactObject) (runtime.Object, bool) {
	s := d.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.at[r]
	if !ok {
		return nil, false
	}
	s.slots[i].used = true
	return s.slots[i].obj, true
}

// put keeps obj as r's decoded object.
func (d *decodedCache) put(r *compactObject, obj runtime.Object) {
	s := d.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.at[r]; ok {
		s.slots[i].obj = obj
		return
	}
	if len(s.slots) < s.max {
		s.at[r] = len(s.slots)
		s.slots = append(s.slots, decodedSlot{rec: r, obj: obj})
		return
	}
	for s.slots[s.hand].used {
		s.slots[s.hand].used = false
		s.hand = (s.hand + 1) % len(s.slots)
	}
	delete(s.at, s.slots[s.hand].rec)
	s.slots[s.hand] = decodedSlot{rec: r, obj: obj}
	s.at[r] = s.hand
	s.hand = (s.hand + 1) % len(s.slots)
}

// len returns how many decoded objects d holds.
func (d *decodedCache) len() int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += len(s.slots)
		s.mu.Unlock()
	}
	return n
}
