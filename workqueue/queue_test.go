package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-dev/converge/workqueue"
)

func TestDedup(t *testing.T) {
	tests := []struct {
		name string
		add  func(q *workqueue.Queue[string], k string)
	}{
		{name: "Add", add: (*workqueue.Queue[string]).Add},
		{name: "AddReplay", add: (*workqueue.Queue[string]).AddReplay},
		{name: "AddAfter 0", add: func(q *workqueue.Queue[string], k string) { q.AddAfter(k, 0) }},
		{name: "mixed", add: func(q *workqueue.Queue[string], k string) {
			q.AddReplay(k)
			q.Add(k)
			q.AddAfter(k, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newFakeQueue(t, workqueue.Options[string]{})
			for range 100 {
				tt.add(q, "k")
			}
			if n := q.Len(); n != 1 {
				t.Fatalf("Len after 100 adds of one key is %d, want 1", n)
			}
			if got := drain(t, q); len(got) != 1 || got[0] != "k" {
				t.Fatalf("got %q, want one k", got)
			}
		})
	}
}

func TestDoneOfKeyNotHeld(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{})
	q.Done("never-got") // ignored: nothing is queued, nothing is tracked
	q.Add("k")
	q.Done("k") // k is queued, not held: it must not be queued twice
	if got := drain(t, q); len(got) != 1 || got[0] != "k" {
		t.Fatalf("got %q, want one k", got)
	}
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Fatalf("%d keys still tracked after the drain", n)
	}
}

func TestEnqueuerAddAfter(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{})
	var e workqueue.Enqueuer[string] = q
	e.AddAfter("k", time.Minute)
	waitTimerSet(t, clk)
	clk.Step(time.Minute - time.Nanosecond)
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d before the delay passed, want 0", n)
	}
	clk.Step(time.Nanosecond)
	if k, _ := q.Get(); k != "k" {
		t.Fatalf("Get returned %q, want k", k)
	}
	q.Done("k")
}

// TestNoConcurrentProcessing runs many workers over few keys, added
// thousands of times in both classes, and checks that no key is ever held by
// two workers and that every key is processed after its last add.
func TestNoConcurrentProcessing(t *testing.T) {
	const (
		workers   = 16
		producers = 8
		addsEach  = 2000
		numKeys   = 8
	)
	q, _ := newFakeQueue(t, workqueue.Options[int]{})

	var (
		version  [numKeys]atomic.Int64 // bumped before each add
		seen     [numKeys]atomic.Int64 // highest version a worker started on
		inFlight [numKeys]atomic.Int32
		gets     atomic.Int64
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				gets.Add(1)
				if n := inFlight[k].Add(1); n != 1 {
					t.Errorf("key %d handed to %d workers at once", k, n)
				}
				v := version[k].Load()
				if v > seen[k].Load() {
					seen[k].Store(v) // only the holder of k writes seen[k]
				}
				inFlight[k].Add(-1)
				q.Done(k)
			}
		})
	}
	var producing sync.WaitGroup
	for p := range producers {
		producing.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(p), 1))
			for range addsEach {
				k := rnd.IntN(numKeys)
				version[k].Add(1)
				switch rnd.IntN(3) {
				case 0:
					q.Add(k)
				case 1:
					q.AddReplay(k)
				default:
					q.AddAfter(k, 0)
				}
			}
		})
	}
	producing.Wait()
	q.ShutDown() // workers drain what is queued, then see shutdown
	wg.Wait()

	for k := range numKeys {
		if s, v := seen[k].Load(), version[k].Load(); s != v {
			t.Errorf("key %d: last processed version %d, last added %d", k, s, v)
		}
	}
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Errorf("%d keys still tracked after all keys were done", n)
	}
	t.Logf("%d adds, %d gets", producers*addsEach, gets.Load())
}

func TestShutDownWithDrainWaitsForInFlight(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{})
	q.Add("a")
	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get returned %q, want a", k)
	}

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	waitUntil(t, "ShuttingDown", q.ShuttingDown)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a key was in flight")
	default:
	}

	q.Add("b")
	q.AddReplay("c")
	q.AddRateLimited("d")
	if n := q.Len(); n != 0 {
		t.Fatalf("Len after adds during shutdown is %d, want 0", n)
	}

	q.Done("a")
	<-drained
	if k, shutdown := q.Get(); !shutdown {
		t.Fatalf("Get after drain returned %q, want shutdown", k)
	}
}

func TestShutDown(t *testing.T) {
	tests := []struct {
		name     string
		shutdown func(*workqueue.Queue[string])
	}{
		{name: "ShutDown", shutdown: (*workqueue.Queue[string]).ShutDown},
		{name: "ShutDownWithDrain", shutdown: (*workqueue.Queue[string]).ShutDownWithDrain},
	}
	for _, tt := range tests {
		t.Run(tt.name+" unblocks waiting workers", func(t *testing.T) {
			q, _ := newFakeQueue(t, workqueue.Options[string]{})
			const waiting = 4
			results := make(chan bool, waiting)
			for range waiting {
				go func() {
					_, shutdown := q.Get()
					results <- shutdown
				}()
			}
			tt.shutdown(q)
			for range waiting {
				if !<-results {
					t.Fatal("Get returned a key from an empty, shut down queue")
				}
			}
		})
		t.Run(tt.name+" ignores later adds", func(t *testing.T) {
			q, clk := newFakeQueue(t, workqueue.Options[string]{})
			q.AddAfter("late", time.Second)
			waitTimerSet(t, clk)
			tt.shutdown(q)
			q.Add("a")
			q.AddReplay("b")
			q.AddAfter("c", 0)
			q.AddAfter("d", time.Second)
			q.AddRateLimited("e")
			clk.Step(time.Hour)
			if !q.ShuttingDown() {
				t.Fatal("ShuttingDown is false")
			}
			if n := q.Len(); n != 0 {
				t.Fatalf("Len is %d, want 0", n)
			}
			if k, shutdown := q.Get(); !shutdown {
				t.Fatalf("Get returned %q, want shutdown", k)
			}
			if n := workqueue.TrackedCauses(q); n != 0 {
				t.Fatalf("%d keys still tracked after shutdown", n)
			}
			tt.shutdown(q) // a second call is harmless
		})
	}
}

// TestShutDownStopsDrain checks the documented escape hatch: ShutDown makes a
// ShutDownWithDrain that waits for a worker return.
func TestShutDownStopsDrain(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{})
	q.Add("stuck")
	mustGet(t, q)
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	waitUntil(t, "ShuttingDown", q.ShuttingDown)
	q.ShutDown()
	<-drained
}

func TestGenericKeys(t *testing.T) {
	type key struct {
		namespace, name string
	}
	q, _ := newFakeQueue(t, workqueue.Options[key]{})
	for i := range 3 {
		q.AddReplay(key{"ns", fmt.Sprint("bg", i)})
	}
	q.Add(key{"ns", "changed"})
	k, _ := q.Get()
	if want := (key{"ns", "changed"}); k != want {
		t.Fatalf("Get returned %v, want %v", k, want)
	}
	q.Done(k)
}
