package informers

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/memsize"
)

// sharer makes equal values of different cached objects one value. Objects
// of one kind repeat themselves: the pods of a ReplicaSet have the same
// labels, annotations, owner reference, node selector and, per container,
// the same resource requests and limits; most objects of a namespace carry
// the same label set. Decoding gives every object its own copy; sharing
// them takes the cache of 5,000 such pods from about 17 KB to 12 KB each.
//
// Cached objects are read-only, so sharing is invisible to readers that
// keep that rule. One that modified a cached map in place (never allowed)
// would now change every object sharing it.
//
// Each kind of value has a table from a hash of the value to the first value
// seen with that hash; an equal value found there replaces the object's own.
// A table holds at most maxShared values: when full, it becomes the old
// generation and a new one starts, and a value found only in the old one
// moves to the new. So values that no cached object holds any more are
// dropped after two generations, and the tables stay small whatever the
// cache holds.
//
// The values shared are listed once, by visitShared: object replaces them
// with the tables' and exclude leaves them out of a measurement.
//
// mu guards every table: transforms of different informers may run at once.
// total is the estimate bytes returns, kept as values enter and leave the
// tables (see table.bytes) and stored after each object shared, so that a
// metrics scrape reads it without the lock or a walk.
type sharer struct {
	seed maphash.Seed

	mu         sync.Mutex
	strings    table[string]
	labels     table[map[string]string]
	resources  table[corev1.ResourceList]
	ownerships table[[]metav1.OwnerReference]

	total atomic.Int64
}

// maxShared bounds each table generation.
const maxShared = 4096

func newSharer() *sharer { return &sharer{seed: maphash.MakeSeed()} }

// table is one kind of shared value, in two generations. curBytes and
// oldBytes estimate the heap bytes of the values of cur and of old (each
// measured by package memsize when it enters the table): a value moved
// from old to cur counts in cur only.
type table[V any] struct {
	cur, old           map[uint64]V
	curBytes, oldBytes int64
}

// share returns the value equal to v already in the table under hash h, or
// records v (when its hash is new) and returns it.
func (t *table[V]) share(h uint64, v V, equal func(a, b V) bool, size func(V) int64) V {
	if c, ok := t.cur[h]; ok {
		if equal(c, v) {
			return c
		}
		return v // a collision: keep the first, share neither
	}
	n := size(v)
	if c, ok := t.old[h]; ok && equal(c, v) {
		v = c
		t.oldBytes -= n
	}
	if len(t.cur) >= maxShared || t.cur == nil {
		t.old, t.cur = t.cur, make(map[uint64]V, min(maxShared, 64))
		t.oldBytes, t.curBytes = t.curBytes, 0
	}
	t.cur[h] = v
	t.curBytes += n
	return v
}

// stringBytes and stringMapBytes are memsize.Of of a string and of a map
// of strings, without its walk by reflection.
func stringBytes(v string) int64 { return memsize.Alloc(int64(len(v)), false) }

func stringMapBytes(m map[string]string) int64 {
	n := memsize.Map(len(m), 32, true)
	for k, v := range m {
		n += stringBytes(k) + stringBytes(v)
	}
	return n
}

// sizeOf is memsize.Of of a V.
func sizeOf[V any](v V) int64 { return memsize.Of(v) }

// bytes estimates the heap bytes of t's maps and values.
func (t *table[V]) bytes() int64 {
	slot := 8 + int64(reflect.TypeFor[V]().Size())
	return t.curBytes + t.oldBytes + memsize.Map(len(t.cur), slot, true) + memsize.Map(len(t.old), slot, true)
}

// object shares what obj has in common with objects seen before. It skips
// unstructured objects, whose accessors copy.
func (s *sharer) object(obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visitShared(obj, s, true)
	s.total.Store(s.strings.bytes() + s.labels.bytes() + s.resources.bytes() + s.ownerships.bytes())
}

// sharedVisitor is handed each value of an object the sharer shares, by
// kind, and returns the value to keep in its place.
type sharedVisitor interface {
	string(string) string
	stringMap(map[string]string) map[string]string
	resourceList(corev1.ResourceList) corev1.ResourceList
	owners([]metav1.OwnerReference) []metav1.OwnerReference
}

// visitShared hands v every value of obj that the sharer shares: the one
// list of them. With write, each value is replaced by what v returns;
// without, obj is only read (it may be a cached object others read).
// Unstructured objects are skipped: their accessors copy.
func visitShared(obj any, v sharedVisitor, write bool) {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if ns := m.GetNamespace(); ns != "" {
		if ns = v.string(ns); write {
			m.SetNamespace(ns)
		}
	}
	if l := m.GetLabels(); len(l) > 0 {
		if l = v.stringMap(l); write {
			m.SetLabels(l)
		}
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		if a = v.stringMap(a); write {
			m.SetAnnotations(a)
		}
	}
	if o := m.GetOwnerReferences(); len(o) > 0 {
		if o = v.owners(o); write {
			m.SetOwnerReferences(o)
		}
	}
	// Fields of typed objects: set through a pointer only with write.
	stringMap := func(p *map[string]string) {
		if n := v.stringMap(*p); write {
			*p = n
		}
	}
	resources := func(p *corev1.ResourceList) {
		if n := v.resourceList(*p); write {
			*p = n
		}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		spec := &o.Spec
		stringMap(&spec.NodeSelector)
		resources(&spec.Overhead)
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				resources(&cs[i].Resources.Requests)
				resources(&cs[i].Resources.Limits)
			}
		}
		if r := spec.Resources; r != nil {
			resources(&r.Requests)
			resources(&r.Limits)
		}
	case *corev1.Node:
		resources(&o.Status.Capacity)
		resources(&o.Status.Allocatable)
	}
}

func (s *sharer) string(v string) string {
	return s.strings.share(maphash.String(s.seed, v), v, func(a, b string) bool { return a == b }, stringBytes)
}

func (s *sharer) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := uint64(len(m))
	for k, v := range m {
		h += s.pair(k, v)
	}
	return s.labels.share(h, m, maps.Equal, stringMapBytes)
}

// pair hashes one map entry; entries are summed, as map order is random.
func (s *sharer) pair(k, v string) uint64 {
	return maphash.String(s.seed, k)*0x9E3779B97F4A7C15 ^ maphash.String(s.seed, v)
}

func (s *sharer) resourceList(m corev1.ResourceList) corev1.ResourceList {
	if len(m) == 0 {
		return m
	}
	h := uint64(len(m))
	for k, q := range m {
		h += maphash.String(s.seed, string(k))*0x9E3779B97F4A7C15 ^ uint64(q.MilliValue())
	}
	return s.resources.share(h, m, func(a, b corev1.ResourceList) bool {
		return maps.EqualFunc(a, b, sameQuantity)
	}, sizeOf)
}

// sameQuantity reports whether a and b read the same in every way, String
// included: a quantity keeps the text it was parsed from only when that
// text is the canonical form of its value and format.
func sameQuantity(a, b resource.Quantity) bool {
	return a.Format == b.Format && a.Cmp(b) == 0
}

func (s *sharer) owners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	h := uint64(len(refs))
	for _, r := range refs {
		h = h*31 + maphash.String(s.seed, string(r.UID)) ^ maphash.String(s.seed, r.Name)
	}
	return s.ownerships.share(h, refs, func(a, b []metav1.OwnerReference) bool {
		return slices.EqualFunc(a, b, sameOwner)
	}, sizeOf)
}

func sameOwner(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		sameBool(a.Controller, b.Controller) && sameBool(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func sameBool(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// exclude tells sz which of obj's values the sharer's tables hold (those
// object shares), so that measuring obj leaves them out: bytes counts
// them, once. obj is only read.
func (s *sharer) exclude(obj any, sz *memsize.Sizer) {
	visitShared(obj, excluder{sz}, false)
}

// excluder is the sharedVisitor of exclude.
type excluder struct{ sz *memsize.Sizer }

func (e excluder) string(v string) string { e.sz.Exclude(v); return v }

func (e excluder) stringMap(v map[string]string) map[string]string { e.sz.Exclude(v); return v }

func (e excluder) resourceList(v corev1.ResourceList) corev1.ResourceList {
	e.sz.Exclude(v)
	return v
}

func (e excluder) owners(v []metav1.OwnerReference) []metav1.OwnerReference {
	e.sz.Exclude(v)
	return v
}

// bytes estimates the heap bytes of the values in s's tables, and of the
// tables: the figure kept as values enter and leave them (see sharer),
// read without the lock.
func (s *sharer) bytes() int64 { return s.total.Load() }
