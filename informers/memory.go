package informers

import (
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/memsize"
)

// sampleEvery is how many objects pass the transform per object measured.
const sampleEvery = 32

// Per-key costs of an informer's store, besides each object: a slot of
// the store's map (the key's string header and the object's interface),
// and one slot per index (the key's string header in the set of its index
// value). The key's bytes are measured with each sample.
const (
	storeSlot = 32
	indexSlot = 16
)

// sizeSampler estimates the bytes of one informer's objects from a
// deterministic sample: every sampleEvery-th object the transform hands
// the store (the first one included) is measured with package memsize,
// with the values the cache shares between objects excluded (they are
// counted once, by Cache.SharedBytes), and the mean of the samples is
// kept: a plain mean of the first sampleEvery samples, then an
// exponentially weighted one that gives each new sample 1/sampleEvery.
type sizeSampler struct {
	seen atomic.Uint64

	mu sync.Mutex
	// sizer, mean and samples are guarded by mu.
	sizer   memsize.Sizer
	mean    float64
	samples int
}

// observe measures obj when it is due.
func (s *sizeSampler) observe(obj any, share *sharer) {
	if s.seen.Add(1)%sampleEvery != 1 {
		return
	}
	if r, ok := obj.(*compactObject); ok {
		// A record's size is known without a walk, which would go on
		// into its codec; its shared values are the sharer's.
		s.add(float64(r.heapBytes() + memsize.Alloc(int64(len(r.namespace)+int(r.nameLen)+1), false)))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizer.Reset()
	if share != nil {
		share.exclude(obj, &s.sizer)
	}
	n := float64(s.sizer.Of(obj))
	if m, ok := obj.(metav1.Object); ok {
		n += float64(memsize.Alloc(int64(len(m.GetNamespace())+len(m.GetName())+1), false)) // the store key
	}
	s.addLocked(n)
}

// add records a sample of n bytes.
func (s *sizeSampler) add(n float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(n)
}

func (s *sizeSampler) addLocked(n float64) {
	s.samples++
	w := 1 / float64(min(s.samples, sampleEvery))
	s.mean += (n - s.mean) * w
}

// perObject returns the mean of the samples, 0 before the first.
func (s *sizeSampler) perObject() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mean
}

// bytes estimates the bytes of e's objects and store.
func (e *entry) bytes(objects int) int64 {
	if objects <= 0 {
		return 0
	}
	return int64(float64(objects)*e.size.perObject()) +
		memsize.Map(objects, storeSlot, true) + e.indexes.Load()*memsize.Map(objects, indexSlot, true)
}

// counter keeps entry.objects.
func (e *entry) counter() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.objects.Add(1) },
		DeleteFunc: func(any) { e.objects.Add(-1) },
	}
}

// SharedBytes estimates the heap bytes of the values cached objects share
// (see Options.DisableSharing): each is counted once here and in no
// informer's InformerStats.Bytes. Zero with DisableSharing. The figure is
// kept as values enter and leave the cache's tables of shared values (each
// measured once, as it enters), so a call reads it without a lock or a
// walk of the tables.
func (c *Cache) SharedBytes() int64 {
	if c.share == nil {
		return 0
	}
	return c.share.bytes()
}
