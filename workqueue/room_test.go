package workqueue_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/converge-dev/converge/workqueue"
)

// A burst of keys (a cache's first sync, keys postponed while their bucket
// syncs) does not leave its room in the queue once it drains: the maps
// that held it are made anew, and a small burst keeps them as they are.
func TestDrainedBurstGivesItsRoomBack(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{})
	keys0, delayed0 := workqueue.MapIdentities(q)

	burst := func(n int) {
		t.Helper()
		for i := range n {
			q.Add(strconv.Itoa(i))
		}
		for range n {
			k := mustGet(t, q)
			q.Postpone(k, time.Second)
			q.Done(k)
		}
		waitTimerSet(t, clk)
		clk.Step(time.Second)
		waitUntil(t, "the postponed keys come back", func() bool { return q.Len() == n })
		for range n {
			q.Done(mustGet(t, q))
		}
		if n := workqueue.TrackedCauses(q); n != 0 {
			t.Fatalf("%d keys still tracked after the burst drained", n)
		}
	}

	burst(10)
	if k, d := workqueue.MapIdentities(q); k != keys0 || d != delayed0 {
		t.Fatalf("a burst of 10 keys made the maps anew (keys %v, delayed %v); want them kept", k != keys0, d != delayed0)
	}
	burst(workqueue.RemakeAt)
	k, d := workqueue.MapIdentities(q)
	if k == keys0 {
		t.Errorf("the keys map that held a burst of %d keys is kept after it drained; want it made anew", workqueue.RemakeAt)
	}
	if d == delayed0 {
		t.Errorf("the delayed map that held a burst of %d postponed keys is kept after it drained; want it made anew", workqueue.RemakeAt)
	}
	// The queue still works on the new maps.
	q.Add("after")
	if got := mustGet(t, q); got != "after" {
		t.Fatalf("got %q, want after", got)
	}
	q.Done("after")
}
