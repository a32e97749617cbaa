package informers

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"

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
// mu guards every table: transforms of different informers may run at once.
type sharer struct {
	seed maphash.Seed

	mu         sync.Mutex
	strings    table[string]
	labels     table[map[string]string]
	resources  table[corev1.ResourceList]
	ownerships table[[]metav1.OwnerReference]
}

// maxShared bounds each table generation.
const maxShared = 4096

func newSharer() *sharer { return &sharer{seed: maphash.MakeSeed()} }

// table is one kind of shared value, in two generations.
type table[V any] struct {
	cur, old map[uint64]V
}

// share returns the value equal to v already in the table under hash h, or
// records v (when its hash is new) and returns it.
func (t *table[V]) share(h uint64, v V, equal func(a, b V) bool) V {
	if c, ok := t.cur[h]; ok {
		if equal(c, v) {
			return c
		}
		return v // a collision: keep the first, share neither
	}
	if c, ok := t.old[h]; ok && equal(c, v) {
		v = c
	}
	if len(t.cur) >= maxShared || t.cur == nil {
		t.old, t.cur = t.cur, make(map[uint64]V, min(maxShared, 64))
	}
	t.cur[h] = v
	return v
}

// object shares what obj has in common with objects seen before. It skips
// unstructured objects, whose accessors copy.
func (s *sharer) object(obj any) {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns := m.GetNamespace(); ns != "" {
		m.SetNamespace(s.string(ns))
	}
	if l := m.GetLabels(); len(l) > 0 {
		m.SetLabels(s.stringMap(l))
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		m.SetAnnotations(s.stringMap(a))
	}
	if o := m.GetOwnerReferences(); len(o) > 0 {
		m.SetOwnerReferences(s.owners(o))
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		s.podSpec(&o.Spec)
	case *corev1.Node:
		o.Status.Capacity = s.resourceList(o.Status.Capacity)
		o.Status.Allocatable = s.resourceList(o.Status.Allocatable)
	}
}

func (s *sharer) podSpec(spec *corev1.PodSpec) {
	spec.NodeSelector = s.stringMap(spec.NodeSelector)
	spec.Overhead = s.resourceList(spec.Overhead)
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests = s.resourceList(r.Requests)
			r.Limits = s.resourceList(r.Limits)
		}
	}
	if r := spec.Resources; r != nil {
		r.Requests = s.resourceList(r.Requests)
		r.Limits = s.resourceList(r.Limits)
	}
}

func (s *sharer) string(v string) string {
	return s.strings.share(maphash.String(s.seed, v), v, func(a, b string) bool { return a == b })
}

func (s *sharer) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := uint64(len(m))
	for k, v := range m {
		h += s.pair(k, v)
	}
	return s.labels.share(h, m, maps.Equal)
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
	})
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
	})
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

// exclude tells s which of obj's values the sharer's tables hold (those
// object shares), so that measuring obj leaves them out: bytes counts
// them, once.
func (s *sharer) exclude(obj any, sz *memsize.Sizer) {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	sz.Exclude(m.GetNamespace())
	sz.Exclude(m.GetLabels())
	sz.Exclude(m.GetAnnotations())
	sz.Exclude(m.GetOwnerReferences())
	lists := func(r corev1.ResourceRequirements) {
		sz.Exclude(r.Requests)
		sz.Exclude(r.Limits)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		sz.Exclude(o.Spec.NodeSelector)
		sz.Exclude(o.Spec.Overhead)
		for _, cs := range [][]corev1.Container{o.Spec.InitContainers, o.Spec.Containers} {
			for i := range cs {
				lists(cs[i].Resources)
			}
		}
		if r := o.Spec.Resources; r != nil {
			lists(*r)
		}
	case *corev1.Node:
		sz.Exclude(o.Status.Capacity)
		sz.Exclude(o.Status.Allocatable)
	}
}

// bytes estimates the heap bytes of the values in s's tables, and of the
// tables.
func (s *sharer) bytes() int64 {
	var sz memsize.Sizer
	s.mu.Lock()
	defer s.mu.Unlock()
	return tableBytes(&sz, &s.strings) + tableBytes(&sz, &s.labels) + tableBytes(&sz, &s.resources) + tableBytes(&sz, &s.ownerships)
}

func tableBytes[V any](sz *memsize.Sizer, t *table[V]) int64 {
	return sz.Of(t.cur) + sz.Of(t.old)
}
