package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-dev/converge/workqueue"
)

// flowOf is the Flow of the tests: the part of a key before "/", and ""
// for a key without one.
func flowOf(k string) string {
	f, _, ok := strings.Cut(k, "/")
	if !ok {
		return ""
	}
	return f
}

// flowStats returns the stats of flow f, and whether the queue has a record
// of it.
func flowStats(q *workqueue.Queue[string], f string) (workqueue.FlowStats, bool) {
	for _, s := range q.Flows() {
		if s.Flow == f {
			return s, true
		}
	}
	return workqueue.FlowStats{}, false
}

// getDone gets and finishes n keys, which must be runnable, and returns
// them in order. (drain cannot be used with a paused flow's keys queued:
// they count in Len, and Get would block.)
func getDone(t *testing.T, q *workqueue.Queue[string], n int) []string {
	t.Helper()
	var got []string
	for range n {
		k := mustGet(t, q)
		got = append(got, k)
		q.Done(k)
	}
	return got
}

// A flood flow with a backlog delays a quiet flow's key by one Get with
// flows, and by its whole backlog without them (the harm flows remove).
func TestFlowsKeepAFloodFromDelayingAQuietFlow(t *testing.T) {
	const backlog = 1000
	for _, tt := range []struct {
		name string
		flow func(string) string
		want int // Gets until the quiet key is handed out
	}{
		{name: "flows", flow: flowOf, want: 2},
		{name: "no flows (negative control)", flow: nil, want: backlog + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: tt.flow})
			for i := range backlog {
				q.Add("flood/" + strconv.Itoa(i))
			}
			q.Add("quiet/k")
			gets := 0
			for {
				k := mustGet(t, q)
				gets++
				q.Done(k)
				if k == "quiet/k" {
					break
				}
			}
			if gets != tt.want {
				t.Errorf("the quiet key was handed out by Get number %d, want %d", gets, tt.want)
			}
		})
	}
}

// TestFlowsMatchModel drives a queue of four flows with random operations
// on a fake clock and checks, at every Get:
//   - inside the flow served, the key is the one the documented model of a
//     queue without flows hands out (so each flow keeps the priority
//     ordering);
//   - fairness: a flow with a key queued is served within k-1 Gets of other
//     flows, k being the most flows with a key queued meanwhile.
func TestFlowsMatchModel(t *testing.T) {
	const delay = 5 * time.Second
	for _, tt := range []struct {
		name      string
		keys, ops int // keys per flow, operations
		seeds     uint64
		maxStep   time.Duration
	}{
		{name: "few keys", keys: 5, ops: 600, seeds: 40, maxStep: 4 * time.Second},
		// Thousands of queued keys: the lanes' fifos grow, wrap around,
		// shrink and are trimmed.
		{name: "many keys", keys: 1500, ops: 12000, seeds: 2, maxStep: 20 * time.Millisecond},
	} {
		for seed := range tt.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", tt.name, seed), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(seed, 1))
				q, clk := newFakeQueue(t, workqueue.Options[string]{ReplayDelay: delay, Flow: flowOf})
				flows := []string{"a", "b", "c", ""}
				models := map[string]*model{}
				for _, f := range flows {
					models[f] = newModel(delay)
				}
				// waited[f] counts the Gets of other flows since f was last
				// served or last had no key queued; most[f] is the most flows
				// with a key queued since then.
				waited, most := map[string]int{}, map[string]int{}
				busy := func() int {
					n := 0
					for _, m := range models {
						if m.len() > 0 {
							n++
						}
					}
					return n
				}
				// track restarts the window of a flow that has no key queued
				// and updates the others' most.
				track := func() {
					k := busy()
					for f, m := range models {
						if m.len() == 0 {
							waited[f], most[f] = 0, 0
						} else {
							most[f] = max(most[f], k)
						}
					}
				}
				var held []string
				get := func(i int) {
					t.Helper()
					k := mustGet(t, q)
					f := flowOf(k)
					if want := models[f].get(); k != want {
						t.Fatalf("op %d: Get returned %q, the model of flow %q says %q", i, k, f, want)
					}
					if waited[f] > most[f]-1 {
						t.Fatalf("op %d: flow %q served after %d Gets of other flows, with at most %d flows queued", i, f, waited[f], most[f])
					}
					for g, m := range models {
						if g != f && m.len() > 0 {
							waited[g]++
						}
					}
					waited[f], most[f] = 0, 0
					held = append(held, k)
					track()
				}
				for i := range tt.ops {
					f := flows[rnd.IntN(len(flows))]
					k := strconv.Itoa(rnd.IntN(tt.keys))
					if f != "" {
						k = f + "/" + k
					}
					w := [4]int{30, 30, 25, 10}
					if i >= tt.ops/2 {
						w = [4]int{5, 5, 50, 35}
					}
					switch op := rnd.IntN(100); {
					case op < w[0]:
						q.Add(k)
						models[f].add(k, true)
					case op < w[0]+w[1]:
						q.AddReplay(k)
						models[f].add(k, false)
					case op < w[0]+w[1]+w[2]:
						if q.Len() > 0 {
							get(i)
						}
					case op < w[0]+w[1]+w[2]+w[3]:
						if len(held) > 0 {
							j := rnd.IntN(len(held))
							q.Done(held[j])
							models[flowOf(held[j])].done(held[j])
							held = slices.Delete(held, j, j+1)
						}
					default:
						d := time.Duration(rnd.Int64N(int64(tt.maxStep)))
						clk.Step(d)
						for _, m := range models {
							m.now = m.now.Add(d)
						}
					}
					track()
					total := 0
					for _, m := range models {
						total += m.len()
					}
					if got := q.Len(); got != total {
						t.Fatalf("op %d: Len is %d, the models say %d", i, got, total)
					}
				}
				for q.Len() > 0 || len(held) > 0 {
					for q.Len() > 0 {
						get(tt.ops)
					}
					for _, k := range held {
						q.Done(k)
						models[flowOf(k)].done(k)
					}
					held = held[:0]
					track()
				}
				if n := workqueue.TrackedCauses(q); n != 0 {
					t.Errorf("%d keys still tracked with none queued or in flight", n)
				}
			})
		}
	}
}

// Get skips a flow at its FlowLimit, and takes it up again at Done.
func TestFlowLimitSkipsAFlowAtItsLimit(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf, FlowLimit: 2})
	for i := range 4 {
		q.Add("a/" + strconv.Itoa(i))
	}
	if a0, a1 := mustGet(t, q), mustGet(t, q); a0 != "a/0" || a1 != "a/1" {
		t.Fatalf("got %q, %q; want a/0, a/1", a0, a1)
	}
	q.Add("b/0")
	if got := mustGet(t, q); got != "b/0" {
		t.Fatalf("with flow a at its limit of 2, Get returned %q; want b/0 (added after a/2)", got)
	}
	if s, _ := flowStats(q, "a"); s.Held != 2 || s.Queued != 2 {
		t.Errorf("flow a: %+v; want 2 held and 2 queued", s)
	}
	// With only flow a queued, at its limit, a Get waits for a Done.
	got := make(chan string)
	go func() {
		k, _ := q.Get()
		got <- k
	}()
	q.Done("a/0")
	if k := <-got; k != "a/2" {
		t.Fatalf("after Done(a/0) Get returned %q; want a/2", k)
	}
}

// Workers never hold more than FlowLimit keys of one flow at once.
func TestFlowLimitBoundsConcurrentWorkers(t *testing.T) {
	const (
		workers = 6
		limit   = 2
		perFlow = 200
	)
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf, FlowLimit: limit})
	flows := []string{"a", "b", "c"}
	for i := range perFlow {
		for _, f := range flows {
			q.Add(f + "/" + strconv.Itoa(i))
		}
	}
	var holding [3]atomic.Int32
	var worst [3]atomic.Int32
	var processed atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				f := strings.IndexByte("abc", k[0])
				n := holding[f].Add(1)
				for w := worst[f].Load(); n > w && !worst[f].CompareAndSwap(w, n); w = worst[f].Load() {
				}
				holding[f].Add(-1)
				q.Done(k)
				if processed.Add(1) == perFlow*int32(len(flows)) {
					q.ShutDown()
				}
			}
		})
	}
	wg.Wait()
	for i, f := range flows {
		if w := worst[i].Load(); w > limit {
			t.Errorf("flow %s: %d keys held at once; FlowLimit is %d", f, w, limit)
		}
	}
}

// A paused flow's keys wait, deduplicated and with their priority, and are
// handed out after ResumeFlow; other flows are served meanwhile.
func TestPauseFlowKeepsKeysUntilResume(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
	q.PauseFlow("a")
	q.AddReplay("a/x")
	q.Add("a/y")
	q.Add("a/y")
	q.Add("a/x") // promotes a/x, queued behind a/y
	q.Add("b/0")
	if n := q.Len(); n != 3 {
		t.Fatalf("Len is %d; want 3 (a/x and a/y once each, b/0)", n)
	}
	if got := mustGet(t, q); got != "b/0" {
		t.Fatalf("Get returned %q; want b/0, flow a being paused", got)
	}
	q.Done("b/0")
	if s, _ := flowStats(q, "a"); !s.Paused || s.Queued != 2 {
		t.Errorf("flow a: %+v; want paused with 2 queued", s)
	}
	// A Get waiting on a paused flow is woken by ResumeFlow.
	got := make(chan string)
	go func() {
		k, _ := q.Get()
		got <- k
	}()
	q.ResumeFlow("a")
	if k := <-got; k != "a/y" {
		t.Fatalf("after ResumeFlow Get returned %q; want a/y", k)
	}
	q.Done("a/y")
	if got := drain(t, q); !slices.Equal(got, []string{"a/x"}) {
		t.Fatalf("drained %q; want [a/x]", got)
	}
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Errorf("%d keys still tracked", n)
	}
}

// Pausing a flow no key is in yet records the pause; resuming one that is
// not paused, or unknown, does nothing and records nothing.
func TestPauseFlowOfAnUnknownFlow(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
	q.ResumeFlow("nobody")
	if fs := q.Flows(); len(fs) != 0 {
		t.Fatalf("ResumeFlow of an unknown flow left records: %+v", fs)
	}
	q.PauseFlow("later")
	q.Add("later/1")
	q.Add("now/1")
	if got := getDone(t, q, 1); !slices.Equal(got, []string{"now/1"}) {
		t.Fatalf("drained %q; want [now/1], flow later being paused before its first key", got)
	}
	q.ResumeFlow("later")
	if got := drain(t, q); !slices.Equal(got, []string{"later/1"}) {
		t.Fatalf("after ResumeFlow drained %q; want [later/1]", got)
	}
}

// The empty flow is a flow like any other: with a Flow function, it holds
// only the keys Flow puts in it; without one, every key.
func TestEmptyFlowName(t *testing.T) {
	t.Run("with Flow", func(t *testing.T) {
		q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
		q.PauseFlow("")
		q.Add("local")
		q.Add("a/1")
		if got := getDone(t, q, 1); !slices.Equal(got, []string{"a/1"}) {
			t.Fatalf("drained %q; want [a/1], flow \"\" being paused", got)
		}
		if s, ok := flowStats(q, ""); !ok || !s.Paused || s.Queued != 1 {
			t.Fatalf("flow \"\": %+v (recorded %v); want paused with 1 queued", s, ok)
		}
		if n := q.DropFlow(""); n != 1 {
			t.Fatalf("DropFlow(\"\") dropped %d keys; want 1", n)
		}
		if _, ok := flowStats(q, "a"); !ok {
			t.Errorf("DropFlow(\"\") dropped flow a's record")
		}
	})
	t.Run("without Flow", func(t *testing.T) {
		q, _ := newFakeQueue(t, workqueue.Options[string]{})
		q.Add("a/1")
		q.PauseFlow("a") // no key is in flow a: keys are all in ""
		if got := drain(t, q); !slices.Equal(got, []string{"a/1"}) {
			t.Fatalf("drained %q; want [a/1]", got)
		}
		q.PauseFlow("")
		q.Add("a/2")
		if fs := q.Flows(); len(fs) != 2 || fs[0].Flow != "" || !fs[0].Paused || fs[0].Queued != 1 {
			t.Fatalf("Flows %+v; want flow \"\" paused with 1 queued, and a", fs)
		}
	})
}

// The flow of a key is read when the queue starts tracking it and kept
// until Done finds it not added again.
func TestKeyMovingFlowsStaysInItsFlowWhileTracked(t *testing.T) {
	home := map[string]string{"k": "a"}
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: func(k string) string { return home[k] }})
	q.Add("k")
	home["k"] = "b"
	q.Add("k")
	if s, _ := flowStats(q, "a"); s.Queued != 1 {
		t.Fatalf("flow a: %+v; want k queued in it", s)
	}
	k := mustGet(t, q)
	q.Add(k) // re-added while held: queued again at Done, still in a
	q.Done(k)
	if s, _ := flowStats(q, "a"); s.Queued != 1 {
		t.Fatalf("flow a after Done: %+v; want k queued in it again", s)
	}
	q.Done(mustGet(t, q)) // done with and not added again: forgotten
	q.Add("k")
	if s, _ := flowStats(q, "b"); s.Queued != 1 {
		t.Fatalf("flow b: %+v; want k queued in it after it was forgotten", s)
	}
	if s, _ := flowStats(q, "a"); s.Queued != 0 {
		t.Fatalf("flow a: %+v; want nothing queued", s)
	}
}

// DropFlow leaves nothing of the flow behind: queued keys, a delayed key
// coming due later, a held key's Done and its re-adds, rate limiting.
func TestDropFlowLeavesNothingBehind(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf, FlowLimit: 5})
	q.Add("a/queued")
	q.AddReplay("a/replay")
	q.AddRateLimited("a/retried") // delayed, with rate-limiter state
	waitTimerSet(t, clk)
	q.Add("a/held")
	q.Add("b/kept")
	if k := mustGet(t, q); k != "a/queued" {
		t.Fatalf("Get returned %q; want a/queued", k)
	}
	q.Done("a/queued")
	if k := mustGet(t, q); k != "b/kept" {
		t.Fatalf("Get returned %q; want b/kept", k)
	}
	q.Done("b/kept")
	if k := mustGet(t, q); k != "a/held" {
		t.Fatalf("Get returned %q; want a/held", k)
	}
	q.AddRateLimited("a/held") // a retry asked before DropFlow
	q.PauseFlow("a")
	q.Add("b/kept")

	if n := q.DropFlow("a"); n != 3 {
		t.Errorf("DropFlow dropped %d keys; want 3 (a/replay queued, a/retried delayed, a/held held)", n)
	}
	if n := q.Len(); n != 1 {
		t.Errorf("Len is %d after DropFlow; want 1 (b/kept)", n)
	}
	if s := q.Stats(); s.Delayed != 0 {
		t.Errorf("Stats.Delayed is %d after DropFlow; want 0", s.Delayed)
	}
	if s, ok := flowStats(q, "a"); ok {
		t.Errorf("flow a still recorded after DropFlow: %+v", s)
	}
	if n := q.NumRequeues("a/retried"); n != 0 {
		t.Errorf("NumRequeues(a/retried) is %d after DropFlow; want 0", n)
	}
	// The reconcile of the held key adds it every way it can; none counts.
	q.Add("a/held")
	q.AddReplay("a/held")
	q.AddAfter("a/held", time.Millisecond)
	q.AddRateLimited("a/held")
	q.Postpone("a/held", time.Millisecond)
	if s := q.Inspect("a/held"); s.Pending || s.Delayed || s.Queued {
		t.Errorf("a/held re-added during its reconcile after DropFlow: %+v; want nothing owed", s)
	}
	q.Done("a/held")
	if n := q.NumRequeues("a/held"); n != 0 {
		t.Errorf("NumRequeues(a/held) is %d after its Done; want 0", n)
	}
	// The delayed keys come due, and are discarded.
	clk.Step(time.Hour)
	waitUntil(t, "the delayed keys come due", func() bool { return workqueue.TrackedCauses(q) == 1 })
	if got := drain(t, q); !slices.Equal(got, []string{"b/kept"}) {
		t.Fatalf("drained %q; want [b/kept]", got)
	}
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Errorf("%d keys still tracked after draining", n)
	}
	if fs := q.Flows(); len(fs) != 1 || fs[0].Flow != "b" {
		t.Errorf("Flows %+v; want only b", fs)
	}
	// The flow starts anew, not paused.
	q.Add("a/new")
	if got := drain(t, q); !slices.Equal(got, []string{"a/new"}) {
		t.Fatalf("drained %q after DropFlow; want [a/new]", got)
	}
}

// A key of a dropped flow that was delayed, then delayed again after
// DropFlow, counts: the new delay is new work.
func TestDropFlowThenAddAfterCounts(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
	q.AddAfter("a/k", time.Second)
	waitTimerSet(t, clk)
	if n := q.DropFlow("a"); n != 1 {
		t.Fatalf("DropFlow dropped %d keys; want 1", n)
	}
	q.AddAfter("a/k", 2*time.Second)
	if s := q.Inspect("a/k"); !s.Delayed {
		t.Fatalf("a/k delayed after DropFlow is %+v; want delayed", s)
	}
	clk.Step(2 * time.Second)
	waitUntil(t, "a/k comes due", func() bool { return q.Len() == 1 })
	if got := drain(t, q); !slices.Equal(got, []string{"a/k"}) {
		t.Fatalf("drained %q; want [a/k]", got)
	}
}

// DropFlow of a flow the queue has no record of drops nothing else.
func TestDropFlowOfAnUnknownFlow(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
	q.Add("a/1")
	if n := q.DropFlow("nobody"); n != 0 {
		t.Fatalf("DropFlow of an unknown flow dropped %d keys", n)
	}
	if got := drain(t, q); !slices.Equal(got, []string{"a/1"}) {
		t.Fatalf("drained %q; want [a/1]", got)
	}
}

// After ShutDown, Get hands out the keys of flows not paused, waits for
// those of a flow at its limit, and reports shutdown rather than waiting
// for a paused flow; ResumeFlow still hands the paused keys out.
func TestShutDownWithPausedFlows(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf, FlowLimit: 1})
	q.PauseFlow("p")
	q.Add("p/1")
	q.Add("l/1")
	q.Add("l/2")
	held := mustGet(t, q)
	q.ShutDown()
	got := make(chan string)
	go func() {
		k, shutdown := q.Get()
		if shutdown {
			k = "shutdown"
		}
		got <- k
	}()
	q.Done(held)
	if k := <-got; k != "l/2" {
		t.Fatalf("Get after ShutDown returned %q; want l/2 once l/1 was done", k)
	}
	q.Done("l/2")
	if _, shutdown := q.Get(); !shutdown {
		t.Fatalf("Get with only a paused flow's key queued did not report shutdown")
	}
	q.ResumeFlow("p")
	if k, shutdown := q.Get(); shutdown || k != "p/1" {
		t.Fatalf("Get after ResumeFlow returned %q, %v; want p/1", k, shutdown)
	}
}

// Flows reports each flow's queued and held keys and its waits.
func TestFlowsReportsWaits(t *testing.T) {
	q, clk := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf})
	for i := range 100 {
		q.Add("a/" + strconv.Itoa(i))
	}
	for range 100 {
		clk.Step(time.Millisecond) // the i-th key waits i ms
		q.Done(mustGet(t, q))
	}
	q.Add("a/held")
	mustGet(t, q)
	q.Add("a/queued")
	s, _ := flowStats(q, "a")
	if s.Held != 1 || s.Queued != 1 {
		t.Errorf("flow a: %+v; want 1 held and 1 queued", s)
	}
	// 101 waits: 1..100 ms and 0 (a/held); the bound is within 25% above.
	within := func(got, want time.Duration) bool { return got >= want && got <= want*5/4 }
	if !within(s.WaitP50, 50*time.Millisecond) {
		t.Errorf("WaitP50 is %v; want 50ms to 62.5ms", s.WaitP50)
	}
	if !within(s.WaitP99, 99*time.Millisecond) {
		t.Errorf("WaitP99 is %v; want 99ms to 123.75ms", s.WaitP99)
	}
}

// Keys lists the keys in the order Get hands them out: the runnable flows
// round-robin, each up to its limit, then the keys of flows at their limit
// and of paused flows, flow by flow.
func TestKeysWithFlows(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{Flow: flowOf, FlowLimit: 2})
	q.PauseFlow("c")
	for _, k := range []string{"a/1", "a/2", "a/3", "c/1", "b/1", "b/2"} {
		q.Add(k)
	}
	keys := func(offset, limit int) []string {
		var out []string
		for _, k := range q.Keys(offset, limit) {
			out = append(out, k.Key)
		}
		return out
	}
	want := []string{"a/1", "b/1", "a/2", "b/2", "a/3", "c/1"}
	if got := keys(0, 100); !slices.Equal(got, want) {
		t.Fatalf("Keys listed %q; want %q", got, want)
	}
	if got := keys(3, 2); !slices.Equal(got, want[3:5]) {
		t.Fatalf("Keys(3, 2) listed %q; want %q", got, want[3:5])
	}
	var got []string
	for range 4 {
		got = append(got, mustGet(t, q)) // held: a reaches its limit
	}
	if !slices.Equal(got, want[:4]) {
		t.Fatalf("Get handed out %q; Keys listed %q first", got, want[:4])
	}
	if got := keys(0, 100); !slices.Equal(got, want[4:]) {
		t.Fatalf("Keys listed %q after the Gets; want %q", got, want[4:])
	}
}
