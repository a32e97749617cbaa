// Package memsize estimates how many bytes of the Go heap a value holds.
//
// The estimate is a walk of the value with package reflect that adds, for
// every allocation the value reaches, what the runtime's allocator spends
// on it:
//
//   - each pointer's target, string's bytes and slice's backing array (its
//     capacity, not its length) is rounded up to the size class the
//     allocator would serve it from (Go 1.26's table), plus the 8-byte
//     header of objects over 512 bytes that hold pointers; pointer-free
//     allocations under 16 bytes cost their own size, as the tiny
//     allocator packs them;
//   - a map costs its header plus groups of eight slots (8 control bytes
//     and eight key-value slots each), enough for its length at the
//     runtime's maximum load of 7/8, then what its keys and values reach;
//     its real size may be up to twice that after deletions;
//   - an interface holding a non-pointer value costs the box of that value;
//   - each allocation is counted once per walk, however many times the
//     value reaches it, and allocations the caller excludes (values shared
//     with other objects, counted once elsewhere) cost nothing;
//   - *time.Location, channels and functions count nothing: they point at
//     shared or static data.
//
// It does not see the memory of other goroutines' stacks, of the
// allocator's free space, or of values reached through unsafe.Pointer.
package memsize
