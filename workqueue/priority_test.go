package workqueue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-dev/converge/workqueue"
)

// TestPriorityTraces runs golden traces: a script of operations on one
// goroutine and a fake clock, then the order in which Get hands out what is
// left. Operations:
//
//	add K | replay K | after K D   Add, AddReplay, AddAfter (waits for its timer)
//	step D                     advance the clock
//	get K | done K             Get (must return K), Done
//	len N | wait N             Len must be N | spin until Len is N
//	shutdown                   ShutDown
func TestPriorityTraces(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration // Options.ReplayDelay
		trace string        // operations, separated by ";"
		want  string        // drain order
	}{
		{name: "normal before replay", trace: "replay x; add a", want: "a x"},
		{name: "replay waits behind normal keys added within the delay", trace: "replay x; step 4999ms; add a", want: "a x"},
		{name: "replay ages past normal keys added after the delay", trace: "replay x; step 4s; add a; step 2s; add b", want: "a x b"},
		{name: "a tie goes to the normal key", trace: "replay x; step 5s; add a", want: "a x"},
		{name: "FIFO within each class", trace: "replay x; replay y; add a; add b", want: "a b x y"},
		{name: "re-adding keeps a normal key's place", trace: "add a; add b; add a", want: "a b"},
		{name: "re-adding keeps a replay key's place", trace: "replay x; replay y; replay x", want: "x y"},
		{name: "dedup across classes", trace: "add a; replay a; add a; replay a; len 1", want: "a"},
		{name: "add promotes a queued replay key", trace: "replay x; replay y; step 1s; add a; add y; len 3", want: "a y x"},
		{name: "promoting the last of several replay keys", trace: "replay x; replay y; replay z; add z", want: "z x y"},
		{name: "promoting in reverse order", trace: "replay x; replay y; replay z; add y; add x", want: "y x z"},
		{name: "promotion never delays an aged key", trace: "replay x; step 6s; add a; add x", want: "x a"},
		{name: "replay add never demotes", trace: "add a; replay x; replay a; add b", want: "a b x"},
		{
			name:  "re-add while processing gets the highest priority requested",
			trace: "replay x; add k; get k; replay k; add k; replay k; len 1; done k; len 2",
			want:  "k x",
		},
		{name: "re-add while processing in replay stays replay", trace: "replay x; add k; get k; replay k; done k", want: "x k"},
		{name: "re-add while processing is queued once, at Done", trace: "add k; get k; add k; add k; len 0; done k; len 1", want: "k"},
		{name: "replay re-queued after a promotion", trace: "replay x; add x; get x; replay x; replay y; done x", want: "y x"},
		{name: "delayed keys are normal priority", trace: "replay x; after k 1s; step 1s; wait 2", want: "k x"},
		{name: "custom delay", delay: time.Second, trace: "replay x; step 1001ms; add a", want: "x a"},
		{name: "huge delay does not wrap around", delay: math.MaxInt64, trace: "step 1h; replay x; add a; step 1000h; add b", want: "a b x"},
		{name: "negative delay is one FIFO", delay: -1, trace: "replay x; add a; replay y; add x", want: "x a y"},
		{name: "shutdown hands out queued keys and ignores adds", trace: "add a; replay x; shutdown; add b; replay c; after d 0s; len 2", want: "a x"},
		{name: "re-add while processing survives shutdown", trace: "add k; get k; replay k; shutdown; done k; len 1", want: "k"},
	}
	// Each trace runs without flows, and with every key in one named flow,
	// whose lane must keep the same order.
	oneFlow := func(string) string { return "one" }
	for _, tt := range tests {
		for _, flow := range []func(string) string{nil, oneFlow} {
			name := tt.name
			if flow != nil {
				name += " (one named flow)"
			}
			t.Run(name, func(t *testing.T) {
				runTrace(t, workqueue.Options[string]{ReplayDelay: tt.delay, Flow: flow}, tt.trace, tt.want)
			})
		}
	}
}

// runTrace runs a golden trace of TestPriorityTraces on a queue with opts.
func runTrace(t *testing.T, opts workqueue.Options[string], trace, want string) {
	t.Helper()
	q, clk := newFakeQueue(t, opts)
	for op := range strings.SplitSeq(trace, ";") {
		runOp(t, q, clk, strings.Fields(op))
	}
	if got := strings.Join(drain(t, q), " "); got != want {
		t.Errorf("trace %q: drained %q, want %q", trace, got, want)
	}
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Errorf("%d keys still tracked with none queued or in flight", n)
	}
}

func runOp(t *testing.T, q *workqueue.Queue[string], clk *clocktesting.FakeClock, f []string) {
	t.Helper()
	arg := func(i int) string {
		if i >= len(f) {
			t.Fatalf("op %q: missing argument %d", f, i)
		}
		return f[i]
	}
	dur := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("op %q: %v", f, err)
		}
		return d
	}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("op %q: %v", f, err)
		}
		return n
	}
	switch arg(0) {
	case "add":
		q.Add(arg(1))
	case "replay":
		q.AddReplay(arg(1))
	case "after":
		d := dur(arg(2))
		q.AddAfter(arg(1), d)
		if d > 0 {
			waitTimerSet(t, clk)
		}
	case "step":
		clk.Step(dur(arg(1)))
	case "get":
		if k := mustGet(t, q); k != arg(1) {
			t.Fatalf("op %q: Get returned %q", f, k)
		}
	case "done":
		q.Done(arg(1))
	case "len":
		if n := q.Len(); n != num(arg(1)) {
			t.Fatalf("op %q: Len is %d", f, n)
		}
	case "wait":
		n := num(arg(1))
		waitUntil(t, fmt.Sprintf("Len is %d", n), func() bool { return q.Len() == n })
	case "shutdown":
		q.ShutDown()
	default:
		t.Fatalf("unknown op %q", f)
	}
}

// TestPriorityMatchesModel drives the queue with random operations on one
// goroutine and compares every Get and Len with a direct transcription of
// the documented model: each queued key has an ordering time (add time, plus
// ReplayDelay for replay), Get takes the smallest, normal first on a
// tie, then first added. Each run fills the queue, then drains it.
func TestPriorityMatchesModel(t *testing.T) {
	const delay = 5 * time.Second
	tests := []struct {
		name    string
		keys    int
		ops     int
		seeds   uint64
		maxStep time.Duration
	}{
		{name: "few keys", keys: 6, ops: 400, seeds: 50, maxStep: 4 * time.Second},
		// Thousands of queued keys: the rings grow, wrap around and shrink.
		{name: "many keys", keys: 4000, ops: 14000, seeds: 2, maxStep: 20 * time.Millisecond},
	}
	for _, tt := range tests {
		for seed := range tt.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", tt.name, seed), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(seed, 0))
				q, clk := newFakeQueue(t, workqueue.Options[string]{ReplayDelay: delay})
				m := newModel(delay)
				var held []string // keys between Get and Done
				peak := 0
				get := func(i int) {
					t.Helper()
					got, want := mustGet(t, q), m.get()
					if got != want {
						t.Fatalf("op %d: Get returned %q, model says %q", i, got, want)
					}
					held = append(held, got)
				}
				for i := range tt.ops {
					k := strconv.Itoa(rnd.IntN(tt.keys))
					// Percent weights: add, replay, get, done; the rest steps.
					w := [4]int{35, 35, 15, 5}
					if i >= tt.ops/2 {
						w = [4]int{5, 5, 50, 30}
					}
					switch op := rnd.IntN(100); {
					case op < w[0]:
						q.Add(k)
						m.add(k, true)
					case op < w[0]+w[1]:
						q.AddReplay(k)
						m.add(k, false)
					case op < w[0]+w[1]+w[2]:
						if m.len() > 0 {
							get(i)
						}
					case op < w[0]+w[1]+w[2]+w[3]:
						if len(held) > 0 {
							j := rnd.IntN(len(held))
							q.Done(held[j])
							m.done(held[j])
							held = slices.Delete(held, j, j+1)
						}
					default:
						d := time.Duration(rnd.Int64N(int64(tt.maxStep)))
						clk.Step(d)
						m.now = m.now.Add(d)
					}
					if got, want := q.Len(), m.len(); got != want {
						t.Fatalf("op %d: Len is %d, model says %d", i, got, want)
					}
					peak = max(peak, m.len())
				}
				for m.len() > 0 || len(held) > 0 {
					for m.len() > 0 {
						get(tt.ops)
					}
					for _, k := range held {
						q.Done(k)
						m.done(k)
					}
					held = held[:0]
				}
				if n := workqueue.TrackedCauses(q); n != 0 {
					t.Errorf("%d keys still tracked with none queued or in flight", n)
				}
				t.Logf("peak Len %d", peak)
			})
		}
	}
}

// model is the queue's documented ordering, written the slow, obvious way.
type model struct {
	delay   time.Duration
	now     time.Time
	seq     int
	queued  map[string]modelEntry
	pending map[string]bool // held keys re-added: normal priority requested?
	held    map[string]bool
}

type modelEntry struct {
	at     time.Time
	normal bool
	seq    int
}

func newModel(delay time.Duration) *model {
	return &model{delay: delay, now: epoch, queued: map[string]modelEntry{}, pending: map[string]bool{}, held: map[string]bool{}}
}

func (m *model) add(k string, normal bool) {
	if m.held[k] {
		m.pending[k] = m.pending[k] || normal
		return
	}
	if e, ok := m.queued[k]; ok {
		if normal && !e.normal && m.now.Before(e.at) {
			m.push(k, true)
		}
		return
	}
	m.push(k, normal)
}

func (m *model) push(k string, normal bool) {
	at := m.now
	if !normal {
		at = at.Add(m.delay)
	}
	m.seq++
	m.queued[k] = modelEntry{at: at, normal: normal, seq: m.seq}
}

func (m *model) get() string {
	var best string
	var b modelEntry
	for k, e := range m.queued {
		if best == "" || e.at.Before(b.at) ||
			(e.at.Equal(b.at) && (e.normal && !b.normal || e.normal == b.normal && e.seq < b.seq)) {
			best, b = k, e
		}
	}
	delete(m.queued, best)
	m.held[best] = true
	return best
}

func (m *model) done(k string) {
	delete(m.held, k)
	if normal, ok := m.pending[k]; ok {
		delete(m.pending, k)
		m.push(k, normal)
	}
}

func (m *model) len() int { return len(m.queued) }
