// Package syncgc raises the garbage collector's GOGC while caches first
// sync, process-wide, for the managers and sharding rings of a process.
package syncgc

import (
	"runtime/debug"
	"sync"
)

// DefaultPercent is the GOGC used while the caches first sync when
// Options.SyncGCPercent is zero.
const DefaultPercent = 400

// syncGC is the process-wide state of Relax: GOGC is one setting per
// process, and several managers may sync at once. mu guards every field.
var syncGC struct {
	mu sync.Mutex
	// holders counts the syncs in progress that raised GOGC.
	holders int
	// prev is the GOGC to restore when the last holder is done.
	prev int
}

// Relax raises GOGC to percent, unless it is already at least that (or
// off, or percent is negative), for the initial list of the caches, and of
// each bucket a ring member claims (each try to read it): decoding it
// allocates, in a second or two, most of what the process keeps, and a
// larger heap target then means far fewer collections of a heap that only
// grows. The returned function restores the previous setting once the last
// concurrent sync is done and hands the memory the sync freed back to the
// operating system, so the process does not keep the sync's peak. A memory
// limit (GOMEMLIMIT) still bounds the heap while GOGC is raised.
func Relax(percent int) (restore func()) {
	if percent < 0 {
		return func() {}
	}
	syncGC.mu.Lock()
	defer syncGC.mu.Unlock()
	if syncGC.holders == 0 {
		prev := debug.SetGCPercent(percent)
		if prev < 0 || prev >= percent {
			debug.SetGCPercent(prev) // off, or already relaxed enough
			return func() {}
		}
		syncGC.prev = prev
	}
	syncGC.holders++
	var once sync.Once
	return func() {
		once.Do(func() {
			syncGC.mu.Lock()
			defer syncGC.mu.Unlock()
			syncGC.holders--
			if syncGC.holders == 0 {
				debug.SetGCPercent(syncGC.prev)
				debug.FreeOSMemory()
			}
		})
	}
}
