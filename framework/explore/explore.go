package explore

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	seedFlag      = flag.Uint64("converge.seed", 0, "replay the schedule of this seed (printed by a failure); 0 explores")
	schedulesFlag = flag.Int("converge.schedules", 0, "schedules to explore (0: the test's Options.Schedules, else 200)")
	faultsFlag    = flag.String("converge.faults", "", "with -converge.seed, inject only these faults of the schedule's plan (numbers from 1, comma-separated)")
)

// Failure is a schedule that broke a property.
type Failure struct {
	// Test is the test's name (empty from Check).
	Test string
	// Seed is the schedule's seed, Schedule its number (0 is the
	// fault-free reference) and Schedules how many were to run.
	Seed                uint64
	Schedule, Schedules int
	// Broken is the broken property: an Invariant's name, "convergence"
	// (the controllers did not converge in time), "deletes" (an object was
	// deleted more often than in the fault-free schedule) or "scenario" (a
	// step failed); Err says how.
	Broken string
	Err    error
	// Plan is the schedule's faults; Shrunk the numbers (from 1) of the
	// smallest subset of them found that still breaks Broken.
	Plan   []Fault
	Shrunk []int
	// Hit describes the write each fault of Shrunk hit, when it hit one.
	Hit map[int]string
	// Replay is the command that replays the shrunk schedule.
	Replay string
}

func (f *Failure) Error() string {
	var b strings.Builder
	name := f.Test
	if name == "" {
		name = "explore"
	}
	fmt.Fprintf(&b, "%s: schedule %d of %d (seed %d) broke %q: %v\n", name, f.Schedule, f.Schedules, f.Seed, f.Broken, f.Err)
	if f.Schedule == 0 {
		b.WriteString("  the fault-free reference schedule breaks it: the scenario fails without faults\n")
	}
	if len(f.Plan) > 0 {
		fmt.Fprintf(&b, "  faults: %s\n", describeFaults(f.Plan, nil, nil))
		fmt.Fprintf(&b, "  shrunk to %d of %d: %s\n", len(f.Shrunk), len(f.Plan), describeFaults(f.Plan, f.Shrunk, f.Hit))
	}
	if f.Replay != "" {
		fmt.Fprintf(&b, "  replay: %s\n", f.Replay)
		b.WriteString("  (a replay repeats the fault plan, each fault on the same numbered write or step, not the goroutines' interleaving)\n")
	}
	return b.String()
}

func describeFaults(plan []Fault, idx []int, hit map[int]string) string {
	if idx == nil {
		idx = make([]int, len(plan))
		for i := range plan {
			idx[i] = i + 1
		}
	}
	var parts []string
	for _, i := range idx {
		s := fmt.Sprintf("#%d %s", i, plan[i-1])
		if h := hit[i]; h != "" {
			s += " (" + h + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Run explores opts's schedules and fails t with a Failure's report if
// one breaks a property. Flags -converge.seed, -converge.schedules and
// -converge.faults override Options.Seed and Options.Schedules, and
// replay one schedule; with none, the seed derives from t's name, so a
// test explores the same schedules on every run.
func Run(t *testing.T, opts Options) {
	t.Helper()
	if opts.Seed == 0 {
		opts.Seed = seedOf(t.Name())
	}
	e := explorer{test: t.Name(), replaySeed: *seedFlag}
	if *schedulesFlag != 0 {
		opts.Schedules = *schedulesFlag
	}
	var err error
	if e.replayFaults, err = parseFaults(*faultsFlag); err != nil {
		t.Fatal(err)
	}
	if e.replayFaults != nil && e.replaySeed == 0 {
		t.Fatal("explore: -converge.faults needs -converge.seed")
	}
	f, err := e.check(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Fatal(f.Error())
	}
}

// Check explores opts's schedules and returns the first Failure, shrunk,
// or nil if every schedule kept every property; the error reports invalid
// options or a schedule that could not run. It reads no flags.
func Check(ctx context.Context, opts Options) (*Failure, error) {
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	return explorer{}.check(ctx, opts)
}

// explorer is one exploration: a test's name and a replay's seed and
// faults, if any.
type explorer struct {
	test         string
	replaySeed   uint64
	replayFaults []int
}

func (e explorer) check(ctx context.Context, opts Options) (*Failure, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	ref, err := runSchedule(ctx, opts, nil)
	if err != nil {
		return nil, err
	}
	if ref.broken != nil {
		return &Failure{Test: e.test, Seed: opts.Seed, Schedules: opts.Schedules, Broken: ref.broken.what, Err: ref.broken.err, Replay: e.replay(opts.Seed, nil)}, nil
	}
	refDeletes := deletes(ref.writes)
	judge := func(o *outcome) *broken {
		if o.broken != nil {
			return o.broken
		}
		return moreDeletes(o.writes, refDeletes)
	}
	planOf := func(seed uint64) []Fault {
		return plan(seed, opts.Faults.Kinds, opts.Faults.Max, ref.attempts, len(opts.Steps))
	}
	seeds := make([]uint64, 0, opts.Schedules)
	for i := 1; i < opts.Schedules; i++ {
		seeds = append(seeds, opts.Seed+uint64(i))
	}
	if e.replaySeed != 0 {
		seeds = []uint64{e.replaySeed}
	}
	type planned struct {
		schedule int
		seed     uint64
		plan     []Fault
		idx      []int
		faults   []Fault
		out      *outcome
		err      error
	}
	var runs []*planned
	for i, seed := range seeds {
		p := planOf(seed)
		idx := make([]int, len(p))
		for j := range p {
			idx[j] = j + 1
		}
		if e.replaySeed != 0 && e.replayFaults != nil {
			idx = e.replayFaults
		}
		faults, err := subset(p, idx)
		if err != nil {
			return nil, fmt.Errorf("explore: -converge.faults: %w", err)
		}
		if len(faults) == 0 && e.replaySeed == 0 {
			continue // the reference already ran this
		}
		n := i + 1
		if e.replaySeed != 0 {
			n = int(seed - opts.Seed) // the schedule's number when it comes from this test's seeds
		}
		runs = append(runs, &planned{schedule: n, seed: seed, plan: p, idx: idx, faults: faults})
	}
	// Schedules run Options.Parallel at a time; the first to fail in seed order
	// is reported, whatever the timing.
	for len(runs) > 0 {
		batch := runs[:min(opts.Parallel, len(runs))]
		runs = runs[len(batch):]
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() { r.out, r.err = runSchedule(ctx, opts, r.faults) })
		}
		wg.Wait()
		for _, r := range batch {
			if r.err != nil {
				return nil, r.err
			}
			if b := judge(r.out); b != nil {
				return e.shrink(ctx, opts, judge, r.schedule, r.seed, r.plan, r.idx, b)
			}
		}
	}
	return nil, nil
}

// shrink finds the smallest subset of the faults idx of plan that still
// breaks b's property, and returns the failure.
func (e explorer) shrink(ctx context.Context, opts Options, judge func(*outcome) *broken, schedule int, seed uint64, p []Fault, idx []int, b *broken) (*Failure, error) {
	fails := func(sub []int) bool {
		fs, _ := subset(p, sub)
		o, err := runSchedule(ctx, opts, fs)
		if err != nil {
			return false
		}
		b2 := judge(o)
		return b2 != nil && b2.what == b.what
	}
	shrunk := ddmin(idx, fails)
	// Run the shrunk schedule once more, to report its own failure and
	// the writes its faults hit.
	hit := map[int]string{}
	fs, _ := subset(p, shrunk)
	o, err := runSchedule(ctx, opts, fs)
	if err != nil {
		return nil, err
	}
	if b2 := judge(o); b2 != nil && b2.what == b.what {
		b = b2
		for k, n := range shrunk {
			hit[n] = hitOf(fs[k], o.writes)
		}
	}
	return &Failure{Test: e.test, Seed: seed, Schedule: schedule, Schedules: opts.Schedules, Broken: b.what, Err: b.err,
		Plan: p, Shrunk: shrunk, Hit: hit, Replay: e.replay(seed, shrunk)}, nil
}

// hitOf describes the write f hit in writes.
func hitOf(f Fault, writes []Write) string {
	if f.Kind == Lag {
		return ""
	}
	for _, w := range writes {
		if w.attempt == f.Write {
			return w.String()
		}
	}
	return "no such write in this run"
}

// ddmin returns a smallest subset of idx (Zeller's delta debugging) for
// which fails holds; fails(idx) is taken to hold.
func ddmin(idx []int, fails func([]int) bool) []int {
	n := 2
	for len(idx) >= 2 {
		chunks := split(idx, n)
		reduced := false
		for _, c := range chunks {
			if fails(c) {
				idx, n, reduced = c, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks {
				var comp []int
				for j, c := range chunks {
					if j != i {
						comp = append(comp, c...)
					}
				}
				if fails(comp) {
					idx, n, reduced = comp, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(idx) {
				break
			}
			n = min(2*n, len(idx))
		}
	}
	return idx
}

func split(xs []int, n int) [][]int {
	var out [][]int
	for i := range n {
		lo, hi := i*len(xs)/n, (i+1)*len(xs)/n
		if lo < hi {
			out = append(out, slices.Clone(xs[lo:hi]))
		}
	}
	return out
}

type objectKey struct {
	kind, namespace, name string
}

// deletes counts the managers' committed deletes per object.
func deletes(writes []Write) map[objectKey]int {
	out := map[objectKey]int{}
	for _, w := range writes {
		if w.Manager != "" && w.Verb == "delete" && w.Committed() {
			out[objectKey{w.Kind.GroupVersion().String() + " " + w.Kind.Kind, w.Namespace, w.Name}]++
		}
	}
	return out
}

// moreDeletes is the delete-count oracle (Sieve's): an object the
// managers deleted more often than in the fault-free schedule.
func moreDeletes(writes []Write, ref map[objectKey]int) *broken {
	got := deletes(writes)
	keys := make([]objectKey, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b objectKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		if got[k] > ref[k] {
			return &broken{what: "deletes", err: fmt.Errorf("the controllers deleted %s %s/%s %d times, %d in the fault-free schedule", k.kind, k.namespace, k.name, got[k], ref[k])}
		}
	}
	return nil
}

// seedOf derives a seed from a test's name.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	if s := h.Sum64() >> 1; s != 0 { // positive as an int64, for the flag's readers
		return s
	}
	return 1
}

// replay returns the command that replays the schedule of seed with the
// faults numbered idx (all of them when nil).
func (e explorer) replay(seed uint64, idx []int) string {
	if e.test == "" {
		return ""
	}
	parts := strings.Split(e.test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := fmt.Sprintf("go test -run '%s' %s -converge.seed=%d", strings.Join(parts, "/"), packageDir(), seed)
	if idx != nil {
		cmd += " -converge.faults=" + joinInts(idx)
	}
	return cmd
}

// packageDir returns the test's package as a path from its module's root
// ("./internal/controller"), or "." when it cannot tell.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return "."
		}
	}
}
