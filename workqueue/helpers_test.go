package workqueue_test

import (
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-dev/converge/workqueue"
)

// epoch is where every fake clock starts.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// newFakeQueue returns a queue on a fake clock, shut down when the test ends.
func newFakeQueue[K comparable](t *testing.T, opts workqueue.Options[K]) (*workqueue.Queue[K], *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	q := workqueue.NewWithClock(opts, clk)
	t.Cleanup(q.ShutDown)
	return q, clk
}

// baseWaiters is how many waiters an unnamed queue keeps on its clock: the
// delaying queue's heartbeat ticker. A fake ticker stays a waiter for ever.
const baseWaiters = 1

// waitUntil spins (yielding, never sleeping) until cond holds. It is for
// state that another goroutine of the queue changes: the delaying queue's
// timer being set, or a delayed key arriving. The real-time deadline only
// turns a hang into a failure.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

// waitTimerSet waits until the delaying queue has set its timer for the next
// delayed key, so that stepping the clock fires it. (Stepping before the
// timer is set can leave it set past the target, client-go computes its
// duration from a Now read before the step.)
func waitTimerSet(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	waitUntil(t, "the delaying queue sets its timer", func() bool { return clk.Waiters() > baseWaiters })
}

// mustGet gets a key that must already be queued (so Get cannot block).
func mustGet(t *testing.T, q *workqueue.Queue[string]) string {
	t.Helper()
	if n := q.Len(); n == 0 {
		t.Fatal("Get on an empty queue would block")
	}
	k, shutdown := q.Get()
	if shutdown {
		t.Fatal("Get reported shutdown with keys queued")
	}
	return k
}

// drain gets and finishes every queued key, returning them in order.
func drain(t *testing.T, q *workqueue.Queue[string]) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		k := mustGet(t, q)
		got = append(got, k)
		q.Done(k)
	}
	return got
}
