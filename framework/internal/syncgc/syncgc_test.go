package syncgc

import (
	"math"
	"runtime/debug"
	"testing"
)

// gogc reads GOGC without changing it.
func gogc() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// withGC sets GOGC and the memory limit for one test and restores the
// process's afterwards.
func withGC(t *testing.T, percent int, limit int64) {
	prevPercent, prevLimit := debug.SetGCPercent(percent), debug.SetMemoryLimit(limit)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
}

func TestBoundLowersGOGCDuringTheSyncAndRestoresIt(t *testing.T) {
	withGC(t, 100, math.MaxInt64)
	restore := Bound(1.4)
	if got := gogc(); got != 40 {
		t.Errorf("GOGC during the sync is %d, want 40: a heap goal of 1.4× the heap marked live", got)
	}
	restore()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after the sync is %d, want 100 again", got)
	}
	restore() // a second call changes nothing
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after restoring twice is %d, want 100", got)
	}
}

func TestBoundRestoresOnlyWhenTheLastConcurrentSyncIsDone(t *testing.T) {
	withGC(t, 150, math.MaxInt64)
	first, second := Bound(1.4), Bound(1.4)
	first()
	if got := gogc(); got != 40 {
		t.Errorf("GOGC with one sync still going is %d, want 40", got)
	}
	second()
	if got := gogc(); got != 150 {
		t.Errorf("GOGC after both syncs is %d, want 150 again", got)
	}
}

func TestBoundNeverChangesTheMemoryLimit(t *testing.T) {
	const limit = 300 << 20
	withGC(t, 100, limit)
	restore := Bound(DefaultRatio)
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the memory limit during the sync is %d, want the user's %d", got, limit)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the memory limit after the sync is %d, want the user's %d", got, limit)
	}
}

func TestBoundLeavesALowerOrOffGOGCAlone(t *testing.T) {
	for _, percent := range []int{20, 40, -1} {
		withGC(t, percent, math.MaxInt64)
		restore := Bound(1.4)
		if got := gogc(); got != percent {
			t.Errorf("GOGC %d during the sync became %d, want it left alone", percent, got)
		}
		restore()
		if got := gogc(); got != percent {
			t.Errorf("GOGC %d after the sync became %d, want it left alone", percent, got)
		}
	}
}

func TestBoundWithANegativeRatioLeavesTheGCAlone(t *testing.T) {
	const limit = 500 << 20
	withGC(t, 100, limit)
	restore := Bound(-1)
	if got, lim := gogc(), debug.SetMemoryLimit(-1); got != 100 || lim != limit {
		t.Errorf("a negative ratio set GOGC %d and limit %d, want 100 and %d untouched", got, lim, limit)
	}
	restore()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after a negative ratio's sync is %d, want 100", got)
	}
}

func TestPercent(t *testing.T) {
	for ratio, want := range map[float64]int{1.4: 40, 1.5: 50, 2: 100, 1.25: 25, 1: 1, 1.001: 1} {
		if got := Percent(ratio); got != want {
			t.Errorf("Percent(%v) = %d, want %d", ratio, got, want)
		}
	}
}
