package informers

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// counts keeps the number of objects an informer holds without a handler
// of its own: each listener (AddListener) counts the adds and deletes
// handed to it, one atomic addition per event, and the informer's count is
// its oldest listener's. A listener added to a running informer first gets
// every cached object as an add, so each listener's count is the store's,
// lagging it by the events not yet handed to that listener. Only while an
// informer has no listener (one only read from, or before its controllers
// add theirs) does a handler count alone: it is registered then, and
// removed when a listener comes. Reading the count takes constant time and
// allocates nothing.
type counts struct {
	mu sync.Mutex
	// live are the counts of the listeners, oldest first; alone is the
	// registration of the handler that counts while there is none, and
	// its count is then live's only one. mu guards both.
	live  []listenerCount
	alone cache.ResourceEventHandlerRegistration
}

// listenerCount is the count one handler keeps.
type listenerCount struct {
	reg cache.ResourceEventHandlerRegistration
	n   *atomic.Int64
}

// len is the number of objects e holds, as its oldest listener counted
// them.
func (e *entry) len() int {
	c := &e.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) == 0 {
		return 0
	}
	return int(max(c.live[0].n.Load(), 0))
}

// countAlone registers the handler that counts e's objects while it has
// no listener.
func (e *entry) countAlone() error {
	c := &e.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.countAloneLocked()
}

func (e *entry) countAloneLocked() error {
	c := &e.counts
	if c.alone != nil || len(c.live) > 0 {
		return nil
	}
	n := new(atomic.Int64)
	reg, err := e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.Add(1) },
		DeleteFunc: func(any) { n.Add(-1) },
	})
	if err != nil {
		return err
	}
	c.alone = reg
	c.live = append(c.live, listenerCount{reg, n})
	return nil
}

// listenerAdded makes reg's count n one of e's, and removes the handler
// that counted alone, if any.
func (e *entry) listenerAdded(reg cache.ResourceEventHandlerRegistration, n *atomic.Int64) {
	c := &e.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = append(c.live, listenerCount{reg, n})
	if c.alone != nil {
		alone := c.alone
		c.alone = nil
		c.live = slices.DeleteFunc(c.live, func(l listenerCount) bool { return l.reg == alone })
		_ = e.informer.RemoveEventHandler(alone) // fails only for an unknown registration
	}
}

// listenerRemoved forgets reg's count; when no listener is left, a
// handler counts alone again (it first gets every cached object).
func (e *entry) listenerRemoved(reg cache.ResourceEventHandlerRegistration) error {
	c := &e.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = slices.DeleteFunc(c.live, func(l listenerCount) bool { return l.reg == reg })
	if e.informer.IsStopped() {
		return nil
	}
	return e.countAloneLocked()
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

// KindStats totals the informers of one kind: what the manager's metrics
// and its debug page show per kind.
type KindStats struct {
	Kind schema.GroupVersionKind
	// Informers counts the kind's informers, StartedByRead those of them
	// a read started (InformerStats.StartedByRead).
	Informers, StartedByRead int
	// Objects and Bytes sum the informers' InformerStats.Objects and Bytes.
	Objects int
	Bytes   int64
}

// ByKind totals stats per kind, the kinds holding the most bytes first
// (by kind name when equal).
func ByKind(stats []InformerStats) []KindStats {
	kinds := []KindStats{}
	at := map[schema.GroupVersionKind]int{}
	for _, st := range stats {
		i, ok := at[st.Kind]
		if !ok {
			i = len(kinds)
			at[st.Kind] = i
			kinds = append(kinds, KindStats{Kind: st.Kind})
		}
		kinds[i].add(st)
	}
	slices.SortFunc(kinds, func(a, b KindStats) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Kind.String(), b.Kind.String()))
	})
	return kinds
}

// Total totals stats whatever their kind, as ByKind totals one kind; its
// Kind is zero. Bytes leaves out the values the cache shares
// (Cache.SharedBytes).
func Total(stats []InformerStats) KindStats {
	var t KindStats
	for _, st := range stats {
		t.add(st)
	}
	return t
}

// add counts st in k.
func (k *KindStats) add(st InformerStats) {
	k.Informers++
	k.Objects += st.Objects
	k.Bytes += st.Bytes
	if st.StartedByRead {
		k.StartedByRead++
	}
}
