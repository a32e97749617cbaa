// Package syncgc bounds the garbage collector's heap goal while caches
// first sync, process-wide, for the managers and sharding rings of a
// process (Bound), and then while a manager's controllers work off the
// backlog the sync queued (Hold).
package syncgc

import (
	"runtime/debug"
	"sync"
	"time"
)

// DefaultRatio is the bound of Bound when Options.SyncHeapRatio is zero.
// It is below the 1.5 a cold start is held to because the workqueue's keys
// and the listeners' buffers are still live when the sync ends.
const DefaultRatio = 1.4

// MaxBound is how long at most a bound of BoundWithin lasts: the
// default sync timeout of a cache (informers.Options.SyncTimeout).
const MaxBound = 2 * time.Minute

// syncGC is the process-wide state of Bound: GOGC is one setting per
// process, and several managers may sync at once. mu guards every field.
var syncGC struct {
	mu sync.Mutex
	// holders counts the syncs in progress that lowered GOGC.
	holders int
	// prev is the GOGC to restore when the last holder is done.
	prev int
}

// Percent is the GOGC that keeps the heap goal at ratio times the heap
// marked live: 100 × (ratio − 1), at least 1.
func Percent(ratio float64) int {
	return max(1, int(100*(ratio-1)+0.5))
}

// Bound lowers GOGC to Percent(ratio) for the initial list of the caches,
// and of each bucket a ring member claims (each try to read it), unless it
// is already at most that, or off, or ratio is negative. Decoding the
// lists allocates about as much garbage (managedFields dropped, values
// replaced by shared ones, frame buffers) as the process keeps, and the
// live heap only grows meanwhile: a heap goal of ratio times the heap
// marked live keeps the heap under about ratio times the heap the sync
// ends with, for more collections of it. A memory limit (GOMEMLIMIT) is
// left as it is. The returned function restores the previous GOGC once
// the last concurrent sync is done and hands the memory the sync freed
// back to the operating system.
func Bound(ratio float64) (restore func()) {
	if ratio < 0 {
		return func() {}
	}
	percent := Percent(ratio)
	syncGC.mu.Lock()
	defer syncGC.mu.Unlock()
	if syncGC.holders == 0 {
		prev := debug.SetGCPercent(percent)
		if prev < 0 || prev <= percent {
			debug.SetGCPercent(prev) // off, or already at most that
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

// BoundWithin is Bound for a sync that may never end, such as the informers
// of an engaged cluster that cannot be listed: the bound is lifted by the
// returned function or once expire delivers (a timer's channel; MaxBound
// is the usual wait), whichever comes first, so that GOGC is not left
// lowered for the whole process meanwhile.
func BoundWithin(ratio float64, expire <-chan time.Time) (restore func()) {
	lift := Bound(ratio)
	done := make(chan struct{})
	go func() {
		select {
		case <-expire:
			lift()
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			lift()
		})
	}
}
