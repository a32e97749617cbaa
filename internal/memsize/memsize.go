package memsize

import (
	"reflect"
	"sync"
	"time"
	"unsafe"
)

// sizeClasses are the runtime's allocation size classes (Go 1.26,
// internal/runtime/gc.SizeClassToSize without class 0).
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
	352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072,
	3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384,
	18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

const (
	maxSmallSize  = 32768
	pageSize      = 8192
	tinySize      = 16
	mallocHeader  = 8
	headerMinSize = 512
	// mapHeader is the size of a map's header (internal/runtime/maps.Map).
	mapHeader = 48
	// tableHeader is the size of one of a large map's tables, and
	// maxTableSlots the most slots one table has.
	tableHeader   = 32
	maxTableSlots = 1024
)

// Alloc returns what the allocator spends on an allocation of n bytes:
// n rounded up to its size class (to whole pages above 32 KiB), plus the
// malloc header of objects over 512 bytes that hold pointers. Pointer-free
// allocations under 16 bytes cost n, as the tiny allocator packs them.
func Alloc(n int64, pointers bool) int64 {
	switch {
	case n <= 0:
		return 0
	case !pointers && n < tinySize:
		return n
	}
	if pointers && n > headerMinSize {
		n += mallocHeader
	}
	if n > maxSmallSize {
		return (n + pageSize - 1) / pageSize * pageSize
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if sizeClasses[mid] < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return sizeClasses[lo]
}

// Map returns what a map of n entries, each slot (key and value) slot bytes
// and holding pointers or not, spends on its header and groups: not what
// its keys and values point to.
func Map(n int, slot int64, pointers bool) int64 {
	if n == 0 {
		return mapHeader
	}
	group := 8 + 8*slot
	if n <= 8 {
		return Alloc(mapHeader, true) + Alloc(group, pointers)
	}
	slots := int64(16)
	for slots*7/8 < int64(n) {
		slots *= 2
	}
	if slots <= maxTableSlots {
		return Alloc(mapHeader, true) + Alloc(tableHeader, true) + Alloc(8, true) + Alloc(slots/8*group, pointers)
	}
	tables := slots / maxTableSlots
	return Alloc(mapHeader, true) + Alloc(8*tables, true) + tables*(Alloc(tableHeader, true)+Alloc(maxTableSlots/8*group, pointers))
}

// Of estimates the heap bytes v holds: when v is a pointer, the value it
// points to and everything that reaches.
func Of(v any) int64 {
	var s Sizer
	return s.Of(v)
}

// Sizer estimates heap bytes as Of does, remembering the allocations it
// counted (and those excluded) until Reset, so that values reached from
// several measured values count once. A Sizer is not safe for concurrent
// use; its zero value is ready to use.
type Sizer struct {
	seen map[uintptr]struct{}
}

// Reset forgets what the Sizer counted and excluded.
func (s *Sizer) Reset() { clear(s.seen) }

// Exclude makes the allocation v refers to (a pointer's target, a string's
// bytes, a slice's array, a map) and what it reaches cost nothing in later
// calls of Of: it is counted elsewhere. Other values are ignored.
func (s *Sizer) Exclude(v any) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return
	}
	if p := rootOf(rv); p != 0 {
		s.mark(p)
	}
}

// Of estimates the heap bytes v holds that this Sizer has not counted yet.
func (s *Sizer) Of(v any) int64 {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return 0
	}
	// A non-pointer v was boxed for the call: what it reaches counts, not
	// the box.
	return s.indirect(rv)
}

// rootOf is the address of the allocation rv refers to, 0 for none.
func rootOf(rv reflect.Value) uintptr {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map:
		if rv.IsNil() {
			return 0
		}
		return rv.Pointer()
	case reflect.Slice:
		if rv.Cap() == 0 {
			return 0
		}
		return rv.Pointer()
	case reflect.String:
		if rv.Len() == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(unsafe.StringData(rv.String())))
	}
	return 0
}

// mark records p and reports whether it was new.
func (s *Sizer) mark(p uintptr) bool {
	if s.seen == nil {
		s.seen = map[uintptr]struct{}{}
	}
	if _, ok := s.seen[p]; ok {
		return false
	}
	s.seen[p] = struct{}{}
	return true
}

var locationType = reflect.TypeFor[time.Location]()

// indirect is what rv reaches beyond its own bytes.
func (s *Sizer) indirect(rv reflect.Value) int64 {
	t := rv.Type()
	if !hasPointers(t) {
		return 0
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() || t.Elem() == locationType || !s.mark(rv.Pointer()) {
			return 0
		}
		e := t.Elem()
		return Alloc(int64(e.Size()), hasPointers(e)) + s.indirect(rv.Elem())
	case reflect.String:
		if rv.Len() == 0 || !s.mark(rootOf(rv)) {
			return 0
		}
		return Alloc(int64(rv.Len()), false)
	case reflect.Slice:
		if rv.Cap() == 0 || !s.mark(rv.Pointer()) {
			return 0
		}
		e := t.Elem()
		n := Alloc(int64(rv.Cap())*int64(e.Size()), hasPointers(e))
		if hasPointers(e) {
			for i := range rv.Len() {
				n += s.indirect(rv.Index(i))
			}
		}
		return n
	case reflect.Array:
		var n int64
		for i := range rv.Len() {
			n += s.indirect(rv.Index(i))
		}
		return n
	case reflect.Struct:
		var n int64
		for i := range rv.NumField() {
			n += s.indirect(rv.Field(i))
		}
		return n
	case reflect.Map:
		if rv.IsNil() || !s.mark(rv.Pointer()) {
			return 0
		}
		k, e := t.Key(), t.Elem()
		n := Map(rv.Len(), slotSize(k, e), hasPointers(k) || hasPointers(e))
		walkK, walkE := hasPointers(k), hasPointers(e)
		if walkK || walkE {
			it := rv.MapRange()
			for it.Next() {
				if walkK {
					n += s.indirect(it.Key())
				}
				if walkE {
					n += s.indirect(it.Value())
				}
			}
		}
		return n
	case reflect.Interface:
		if rv.IsNil() {
			return 0
		}
		d := rv.Elem()
		switch d.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return s.indirect(d)
		case reflect.Bool:
			return 0 // the runtime boxes booleans in static memory
		}
		return Alloc(int64(d.Type().Size()), hasPointers(d.Type())) + s.indirect(d)
	}
	return 0
}

// slotSize is the size of a map slot of key k and value e.
func slotSize(k, e reflect.Type) int64 {
	align := int64(max(k.Align(), e.Align(), 1))
	ks := (int64(k.Size()) + align - 1) / align * align
	es := (int64(e.Size()) + align - 1) / align * align
	return ks + es
}

var pointerTypes sync.Map // reflect.Type -> bool

// hasPointers reports whether a value of t may reach heap memory.
func hasPointers(t reflect.Type) bool {
	if v, ok := pointerTypes.Load(t); ok {
		return v.(bool)
	}
	p := computePointers(t, map[reflect.Type]bool{})
	pointerTypes.Store(t, p)
	return p
}

func computePointers(t reflect.Type, visiting map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && computePointers(t.Elem(), visiting)
	case reflect.Struct:
		if visiting[t] {
			return false
		}
		visiting[t] = true
		for i := range t.NumField() {
			if computePointers(t.Field(i).Type, visiting) {
				return true
			}
		}
	}
	return false
}
