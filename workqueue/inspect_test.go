package workqueue_test

import (
	"fmt"
	"testing"
	"time"

	clientgo "k8s.io/client-go/util/workqueue"

	creconcile "github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

func TestStatsByPriority(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{})
	if s := q.Stats(); s != (workqueue.Stats{}) {
		t.Fatalf("empty queue: Stats = %+v, want zero", s)
	}
	q.Add("a")
	clk.Step(time.Second)
	q.AddReplay("x")
	q.AddReplay("y")
	clk.Step(time.Second)
	q.Add("b")
	q.AddAfter("later", time.Hour)

	s := q.Stats()
	want := workqueue.Stats{
		Normal:  workqueue.ClassStats{Depth: 2, Oldest: epoch},
		Replay:  workqueue.ClassStats{Depth: 2, Oldest: epoch.Add(time.Second)},
		Delayed: 1,
	}
	if s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}

	// A promoted replay key keeps the time it was first queued.
	q.Add("y")
	s = q.Stats()
	if s.Normal.Depth != 3 || s.Replay.Depth != 1 || !s.Replay.Oldest.Equal(epoch.Add(time.Second)) {
		t.Fatalf("after promoting y: Stats = %+v", s)
	}
	if got := mustGet(t, q); got != "a" {
		t.Fatalf("Get = %q, want a", got)
	}
	if s := q.Stats(); !s.Normal.Oldest.Equal(epoch.Add(2 * time.Second)) {
		t.Fatalf("after Get a: Normal.Oldest = %v, want b's time", s.Normal.Oldest)
	}
	q.ShutDown()
	if !q.Stats().ShuttingDown {
		t.Fatal("Stats.ShuttingDown is false after ShutDown")
	}
}

func TestInspect(t *testing.T) {
	limiter := clientgo.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Hour)
	q, clk := newFakeQueue(t, workqueue.Options[string]{RateLimiter: limiter})

	if s := q.Inspect("nobody"); s != (workqueue.KeyState{}) {
		t.Fatalf("unknown key: %+v, want zero", s)
	}

	q.AddReplay("bg")
	clk.Step(time.Second)
	q.Add("n")
	if s := q.Inspect("bg"); !s.Queued || !s.Replay || !s.Since.Equal(epoch) || s.Reason != creconcile.ReasonReplay {
		t.Errorf("replay key: %+v", s)
	}
	if s := q.Inspect("n"); !s.Queued || s.Replay || !s.Since.Equal(epoch.Add(time.Second)) || s.Reason != creconcile.ReasonChange {
		t.Errorf("normal key: %+v", s)
	}

	// A failing key: held, retried twice, waiting for its third attempt.
	q.Add("f")
	for mustGet(t, q) != "f" {
	}
	q.AddRateLimited("f") // 1 s
	q.Done("f")
	waitTimerSet(t, clk)
	clk.Step(time.Second)
	waitUntil(t, "f is queued again", func() bool { return q.Inspect("f").Queued })
	for mustGet(t, q) != "f" {
	}
	q.Add("f") // re-added while held
	if s := q.Inspect("f"); !s.Pending || s.Queued {
		t.Errorf("held and re-added: %+v", s)
	}
	q.AddRateLimited("f") // 2 s
	s := q.Inspect("f")
	if !s.Delayed || s.DelayReason != creconcile.ReasonRetry || s.Retries != 2 || !s.Due.Equal(clk.Now().Add(2*time.Second)) {
		t.Errorf("failing key: %+v, want delayed retry #2 due in 2 s", s)
	}
	q.Done("f")
	if s := q.Inspect("f"); !s.Queued || s.Reason != creconcile.ReasonChange || !s.Delayed {
		t.Errorf("after Done: %+v, want queued (change) and still delayed", s)
	}

	q.AddAfter("r", 10*time.Second)
	q.AddAfter("r", 5*time.Second)
	if s := q.Inspect("r"); !s.Delayed || s.DelayReason != creconcile.ReasonRequeue || !s.Due.Equal(clk.Now().Add(5*time.Second)) {
		t.Errorf("requeued key: %+v, want the earlier delay", s)
	}
}

func TestKeysPagesInGetOrder(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{})
	q.AddReplay("x")
	for i := range 10 {
		q.Add(fmt.Sprint(i))
	}
	clk.Step(6 * time.Second) // x has aged past normal keys added now
	q.Add("late")
	q.AddReplay("y")
	q.Add("y") // promoted: its dead replay entry must not be listed

	var all []string
	for off := 0; ; off += 3 {
		page := q.Keys(off, 3)
		if len(page) > 3 {
			t.Fatalf("Keys(%d, 3) returned %d keys", off, len(page))
		}
		for _, k := range page {
			all = append(all, k.Key)
			if k.Replay != (k.Key == "x") {
				t.Errorf("key %s: Replay = %v", k.Key, k.Replay)
			}
		}
		if len(page) < 3 {
			break
		}
	}
	want := fmt.Sprint([]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "x", "late", "y"})
	if fmt.Sprint(all) != want {
		t.Fatalf("paged keys = %v, want %v", all, want)
	}
	var got []string
	for q.Len() > 0 {
		got = append(got, mustGet(t, q))
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("Get order = %v, Keys listed %v", got, want)
	}
	if q.Keys(0, 0) != nil || q.Keys(-1, 5) != nil {
		t.Fatal("Keys with a zero limit or a negative offset must return nil")
	}
}
