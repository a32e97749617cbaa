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

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/framework/envtest"
)

var (
	seedFlag      = flag.Uint64("converge.seed", 0, "replay the schedule of this seed: its whole fault plan; 0 explores")
	schedulesFlag = flag.Int("converge.schedules", 0, "schedules to explore (0: the test's Options.Schedules, else 200)")
	faultsFlag    = flag.String("converge.faults", "", "replay one schedule with exactly these faults (printed by a failure), comma-separated: 409@wN, 500@wN, crash@wN (the N-th write, from 1) and lag@sK (from step K) on framework/fake; 409@wN, 500@wN, crash@wN, restart@wN, hold@wN and expire@sK on Options.Envtest")
)

// Failure is a schedule that broke a property.
type Failure struct {
	// Test is the test's name (empty from Check).
	Test string
	// Seed is the schedule's seed, Schedule its number (0 is the
	// fault-free reference) and Schedules how many were to run. Seed is 0
	// when the faults came from the -converge.faults flag.
	Seed                uint64
	Schedule, Schedules int
	// Broken is the broken property: an Invariant's name, "convergence"
	// (the controllers did not converge in time), "deletes" (an object was
	// deleted more often than in the fault-free schedule) or "scenario" (a
	// step failed); Err says how. An Invariant's Check or a Step's Do
	// that panics breaks its property (the Invariant's, or "scenario").
	Broken string
	Err    error
	// Plan is the schedule's faults; Shrunk the numbers (from 1) of the
	// smallest subset of them found that still breaks Broken.
	Plan   []Fault
	Shrunk []int
	// Hit describes the write each fault of Shrunk hit, or says that it
	// did not fire.
	Hit map[int]string
	// Command is the go test command that replays the shrunk schedule:
	// its faults, each on its numbered write or step. From Check, which
	// knows no test, it is only the flags to add to the test's own go test
	// command ("-converge.faults=409@w4,crash@w2").
	Command string

	// replayed is set when -converge.seed chose the schedule: one ran, not
	// Schedules.
	replayed bool
}

func (f *Failure) Error() string {
	var b strings.Builder
	name := f.Test
	if name == "" {
		name = "explore"
	}
	if f.Seed == 0 && len(f.Plan) > 0 {
		fmt.Fprintf(&b, "%s: the replayed faults %s broke %q: %v\n", name, tokens(f.Plan), f.Broken, f.Err)
	} else if f.replayed {
		fmt.Fprintf(&b, "%s: the replayed schedule %d (seed %d) broke %q: %v\n", name, f.Schedule, f.Seed, f.Broken, f.Err)
	} else {
		fmt.Fprintf(&b, "%s: schedule %d of %d (seed %d) broke %q: %v\n", name, f.Schedule, f.Schedules, f.Seed, f.Broken, f.Err)
	}
	if f.Schedule == 0 && f.Seed != 0 {
		b.WriteString("  the fault-free reference schedule breaks it: the scenario fails without faults\n")
	}
	if len(f.Plan) > 0 {
		fmt.Fprintf(&b, "  faults: %s\n", describeFaults(f.Plan, nil, nil))
		fmt.Fprintf(&b, "  shrunk to %d of %d: %s\n", len(f.Shrunk), len(f.Plan), describeFaults(f.Plan, f.Shrunk, f.Hit))
	}
	if f.Command != "" {
		fmt.Fprintf(&b, "  replay: %s\n", f.Command)
		b.WriteString("  (a replay repeats these faults, each on the same numbered write or step, not the goroutines' interleaving)\n")
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
	return strings.Join(parts, "; ")
}

// Run explores opts's schedules and fails t with a Failure's report if
// one breaks a property; a passing run logs how many schedules ran and
// the faults they injected. Flags -converge.seed, -converge.schedules and
// -converge.faults override Options.Seed and Options.Schedules, and
// replay one schedule; with none, the seed derives from t's name, so a
// test explores the same schedules on every run.
func Run(t *testing.T, opts Options) {
	t.Helper()
	e, opts, err := fromFlags(t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.check(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Fatal(f.Error())
	}
	t.Log(e.stats.String())
}

// fromFlags returns test's explorer and opts as Run's flags set them.
func fromFlags(test string, opts Options) (*explorer, Options, error) {
	if opts.Seed == 0 {
		opts.Seed = seedOf(test)
	}
	e := &explorer{test: test, replaySeed: *seedFlag}
	if *schedulesFlag < 0 {
		return nil, opts, fmt.Errorf("explore: -converge.schedules=%d: it must not be negative", *schedulesFlag)
	}
	if *schedulesFlag != 0 {
		opts.Schedules = *schedulesFlag
	}
	var err error
	if e.replayFaults, err = parseFaults(*faultsFlag, len(opts.Steps)); err != nil {
		return nil, opts, fmt.Errorf("explore: %w", err)
	}
	kinds, plane := fakeKinds, "framework/fake (this test sets no Options.Envtest)"
	if opts.Envtest != nil {
		kinds, plane = realKinds, "a test control plane (Options.Envtest)"
	}
	for _, f := range e.replayFaults {
		if !slices.Contains(kinds, f.Kind) {
			return nil, opts, fmt.Errorf("explore: -converge.faults=%s: %s: %s cannot inject %v faults: replay it in a test on the plane that printed it", *faultsFlag, f.token(), plane, f.Kind)
		}
	}
	return e, opts, nil
}

// Check explores opts's schedules and returns the first Failure, shrunk,
// or nil if every schedule kept every property; the error reports invalid
// options or a schedule that could not run. It reads no flags.
func Check(ctx context.Context, opts Options) (*Failure, error) {
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	return (&explorer{}).check(ctx, opts)
}

// explorer is one exploration: a test's name, a replay's seed or faults,
// if any, and what the schedules injected.
type explorer struct {
	test         string
	replaySeed   uint64
	replayFaults []Fault
	stats        stats
}

// stats counts what an exploration's schedules injected.
type stats struct {
	schedules int
	injected  map[FaultKind]int
	unfired   int
}

func (s stats) String() string {
	if s.schedules <= 1 && len(s.injected) == 0 && s.unfired == 0 {
		return fmt.Sprintf("explore: %d schedule, the fault-free reference: no fault injected", s.schedules)
	}
	var kinds []string
	for _, k := range []FaultKind{Conflict, ServerError, Crash, Lag, Restart, Expire, Hold} {
		if n := s.injected[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
	}
	inj := "no fault injected"
	if len(kinds) > 0 {
		inj = "faults injected: " + strings.Join(kinds, ", ")
	}
	return fmt.Sprintf("explore: %d schedules (the fault-free reference included), %s; %d drawn faults did not fire (the run did not reach their write, or the write failed before a crash)", s.schedules, inj, s.unfired)
}

func (s *stats) add(faults []Fault, o *outcome) {
	s.schedules++
	if o == nil {
		return
	}
	if s.injected == nil {
		s.injected = map[FaultKind]int{}
	}
	for i, f := range faults {
		if o.fired[i] {
			s.injected[f.Kind]++
		} else {
			s.unfired++
		}
	}
}

// planned is one schedule to run.
type planned struct {
	schedule int
	seed     uint64
	plan     []Fault
	out      *outcome
	err      error
}

func (e *explorer) check(ctx context.Context, opts Options) (*Failure, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	if opts.Envtest != nil && len(opts.CRDs) > 0 {
		crds := make([]runtime.Object, len(opts.CRDs))
		for i, c := range opts.CRDs {
			crds[i] = c
		}
		if err := opts.Envtest.InstallCRDs(ctx, envtest.CRDOptions{Objects: crds}); err != nil {
			return nil, fmt.Errorf("explore: Options.CRDs: %w", err)
		}
	}
	ref, err := runSchedule(ctx, opts, nil)
	e.stats.add(nil, ref)
	if err != nil {
		return nil, fmt.Errorf("%w\n  in the fault-free reference schedule (seed %d)%s", err, opts.Seed, e.replayHint(nil))
	}
	if ref.broken != nil {
		return &Failure{Test: e.test, Seed: opts.Seed, Schedules: opts.Schedules, Broken: ref.broken.what, Err: ref.broken.err, Command: e.replay(nil)}, nil
	}
	refDeletes := deletes(ref.writes)
	judge := func(o *outcome) *broken {
		if o.broken != nil {
			return o.broken
		}
		return moreDeletes(o.writes, refDeletes)
	}
	runs := e.plans(opts, max(minWrites, ref.attempts))
	// Schedules run Options.Parallel at a time; the first to fail in seed order
	// is reported, whatever the timing.
	for len(runs) > 0 {
		batch := runs[:min(opts.Parallel, len(runs))]
		runs = runs[len(batch):]
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() { r.out, r.err = runSchedule(ctx, opts, r.plan) })
		}
		wg.Wait()
		for _, r := range batch {
			e.stats.add(r.plan, r.out)
			if r.err != nil {
				return nil, fmt.Errorf("%w\n  in schedule %d of %d (seed %d, faults %s)%s", r.err, r.schedule, opts.Schedules, r.seed, tokens(r.plan), e.replayHint(r.plan))
			}
			if b := judge(r.out); b != nil {
				return e.shrink(ctx, opts, judge, r, b)
			}
		}
	}
	return nil, nil
}

// plans returns the schedules to run after the reference: the faults of
// -converge.faults, the plan of -converge.seed, or those of opts's seeds,
// with write triggers among writes 1 to writes.
func (e *explorer) plans(opts Options, writes int) []*planned {
	planOf := func(seed uint64) []Fault {
		return plan(seed, opts.Faults.Kinds, opts.Faults.Max, len(opts.Steps), writes)
	}
	switch {
	case e.replayFaults != nil:
		return []*planned{{plan: e.replayFaults}}
	case e.replaySeed != 0:
		// The schedule's number when the seed comes from this test's seeds.
		return []*planned{{schedule: int(e.replaySeed - opts.Seed), seed: e.replaySeed, plan: planOf(e.replaySeed)}}
	}
	var runs []*planned
	for i := 1; i < opts.Schedules; i++ {
		seed := opts.Seed + uint64(i)
		if p := planOf(seed); len(p) > 0 { // a fault-free plan is the reference's
			runs = append(runs, &planned{schedule: i, seed: seed, plan: p})
		}
	}
	return runs
}

// shrink finds the smallest subset of r's faults that still breaks b's
// property, and returns the failure.
func (e *explorer) shrink(ctx context.Context, opts Options, judge func(*outcome) *broken, r *planned, b *broken) (*Failure, error) {
	fails := func(sub []int) bool {
		o, err := runSchedule(ctx, opts, subset(r.plan, sub))
		if err != nil {
			return false
		}
		b2 := judge(o)
		return b2 != nil && b2.what == b.what
	}
	idx := make([]int, len(r.plan))
	for j := range r.plan {
		idx[j] = j + 1
	}
	shrunk := ddmin(idx, fails)
	// Run the shrunk schedule once more, to report its own failure and
	// the writes its faults hit; unless nothing was shrunk, when the
	// schedule that failed tells it.
	hit := map[int]string{}
	fs := subset(r.plan, shrunk)
	o := r.out
	if len(shrunk) < len(r.plan) {
		var err error
		if o, err = runSchedule(ctx, opts, fs); err != nil {
			return nil, fmt.Errorf("%w\n  in a shrunk schedule (faults %s)%s", err, tokens(fs), e.replayHint(fs))
		}
	}
	if b2 := judge(o); b2 != nil && b2.what == b.what {
		b = b2
		for k, n := range shrunk {
			hit[n] = hitOf(fs[k], o.fired[k], o)
		}
	}
	return &Failure{Test: e.test, Seed: r.seed, Schedule: r.schedule, Schedules: opts.Schedules, Broken: b.what, Err: b.err,
		Plan: r.plan, Shrunk: shrunk, Hit: hit, Command: e.replay(fs), replayed: e.replaySeed != 0}, nil
}

// hitOf describes the write f hit in o, or says that it did not fire.
func hitOf(f Fault, fired bool, o *outcome) string {
	switch {
	case f.Kind == Expire && !fired:
		return "did not fire: no informer listed again (kube-apiserver resumes watches from its watch cache unless started with --watch-cache=false)"
	case f.Kind.onStep() && !fired:
		return "did not fire: the scenario stopped before"
	case f.Kind.onStep():
		return ""
	}
	for _, w := range o.writes {
		if w.attempt == f.Write {
			if !fired {
				return "did not fire: " + w.String()
			}
			return w.String()
		}
	}
	return fmt.Sprintf("did not fire: the controllers sent %d writes", o.attempts)
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

// deletes counts the managers' deletes that removed something (answered
// 2xx: a delete answered 404 found nothing to remove), per object.
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

// replay returns the command that replays faults (a fault-free
// schedule when empty).
func (e *explorer) replay(faults []Fault) string {
	if e.test == "" {
		if len(faults) == 0 {
			return "-converge.schedules=1"
		}
		return "-converge.faults=" + tokens(faults)
	}
	parts := strings.Split(e.test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := fmt.Sprintf("go test -run '%s' %s", strings.Join(parts, "/"), packageDir())
	if len(faults) == 0 {
		return cmd + " -converge.schedules=1"
	}
	return cmd + " -converge.faults=" + tokens(faults)
}

// replayHint is "; replay: <command>" for Run, empty for Check.
func (e *explorer) replayHint(faults []Fault) string {
	if e.test == "" {
		return ""
	}
	return "; replay: " + e.replay(faults)
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
