package syncgc

import (
	"math"
	"runtime/debug"
	"testing"
	"testing/synctest"
	"time"
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

func TestBoundWithinIsLiftedWhenItExpires(t *testing.T) {
	// A sync that never ends (informers of a cluster that cannot be
	// listed) keeps GOGC lowered until the bound expires, not for ever; a
	// sync that ends first lifts it then, and an expiry after that changes
	// nothing. Time is the bubble's fake clock.
	synctest.Test(t, func(t *testing.T) {
		withGC(t, 100, math.MaxInt64)
		restore := BoundWithin(1.4, time.After(MaxBound))
		if got := gogc(); got != 40 {
			t.Errorf("GOGC during the sync is %d, want 40", got)
		}
		time.Sleep(MaxBound - time.Second)
		synctest.Wait()
		if got := gogc(); got != 40 {
			t.Errorf("GOGC just before the bound expires is %d, want 40", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := gogc(); got != 100 {
			t.Errorf("GOGC once the bound expired is %d, want 100 again", got)
		}
		restore() // the sync ends later: nothing left to restore
		if got := gogc(); got != 100 {
			t.Errorf("GOGC after the late end of the sync is %d, want 100", got)
		}

		// Adversarial: one expiry does not lift another sync's bound.
		expiring, other := BoundWithin(1.4, time.After(time.Minute)), Bound(1.4)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := gogc(); got != 40 {
			t.Errorf("GOGC with another sync still going is %d, want 40", got)
		}
		other()
		expiring()
		if got := gogc(); got != 100 {
			t.Errorf("GOGC after both syncs is %d, want 100", got)
		}

		// A sync that ends in time lifts the bound at once.
		ended := BoundWithin(1.4, time.After(MaxBound))
		ended()
		if got := gogc(); got != 100 {
			t.Errorf("GOGC after the sync ended is %d, want 100", got)
		}
	})
}
