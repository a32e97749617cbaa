package main

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/converge-dev/converge/bench/internal/workload"
)

func TestParseSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{" ", nil},
		{"1000", []int{1000}},
		{"1000,10000,50000", []int{1000, 10000, 50000}},
		{"50000, 1000 ,10000", []int{1000, 10000, 50000}},
	} {
		got, err := parseSizes(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for in, want := range map[string]string{
		"1000,abc":    `"abc" is not an object count`,
		"1000,":       `"" is not an object count`,
		"1e3":         `"1e3" is not an object count`,
		"0":           "0: an object count is at least 1",
		"100,-5":      "-5: an object count is at least 1",
		"100,300,100": "100 is given twice",
	} {
		_, err := parseSizes(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "--sizes: ") {
			t.Errorf("parseSizes(%q): got error %v, want one with %q", in, err, want)
		}
	}
}

func TestScalePlan(t *testing.T) {
	own := func(cm, parents string) map[workload.Kind]string {
		return map[workload.Kind]string{workload.ConfigMaps: cm, workload.Parents: parents}
	}
	if plan, err := scalePlan("", own("", ""), nil); plan != nil || err != nil {
		t.Errorf("no sizes: got %v, %v; want the usual run", plan, err)
	}
	plan, err := scalePlan("1000,100", own("100000,1000", ""), nil)
	want := []scaleWorkload{{workload.ConfigMaps, []int{1000, 100000}}, {workload.Parents, []int{100, 1000}}}
	if err != nil || !slices.EqualFunc(plan, want, func(a, b scaleWorkload) bool { return a.kind == b.kind && slices.Equal(a.sizes, b.sizes) }) {
		t.Errorf("got %v, %v; want %v", plan, err, want)
	}
	if plan, err := scalePlan("", own("", "100"), nil); err != nil || len(plan) != 1 || plan[0].kind != workload.Parents {
		t.Errorf("--parents-sizes alone: got %v, %v; want parents only", plan, err)
	}
	if plan, err := scalePlan("100", own("", ""), []string{"parents", "configmaps"}); err != nil || len(plan) != 2 || plan[0].kind != workload.Parents {
		t.Errorf("--workloads=parents,configmaps: got %v, %v; want both, in that order", plan, err)
	}
	for _, c := range []struct {
		sizes, cm, parents string
		workloads          []string
		want               string
	}{
		{"", "10,x", "", nil, `--configmaps-sizes: "x" is not an object count`},
		{"0", "", "", nil, "--sizes: 0: an object count is at least 1"},
		{"", "100", "", []string{"configmaps", "parents"}, "no sizes for parents: give --sizes or --parents-sizes"},
		{"100", "", "", []string{"configmaps", "pods"}, "not pods"},
	} {
		if _, err := scalePlan(c.sizes, own(c.cm, c.parents), c.workloads); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got error %v, want one with %q", c, err, c.want)
		}
	}
}

func TestCheckScaleWorkloads(t *testing.T) {
	if err := checkScaleWorkloads(strings.Split(scaleDefaultWorkloads, ",")); err != nil {
		t.Errorf("the default workloads: %v", err)
	}
	if err := checkScaleWorkloads([]string{"parents"}); err != nil {
		t.Errorf("parents alone: %v", err)
	}
	for w, want := range map[string]string{
		"pods":    "not pods: run pods without --sizes (with --pods=N",
		"widgets": "not widgets",
		"sharded": "not sharded: run sharded without --sizes (with --sharded-sizes=N",
		"nodes":   `unknown workload "nodes"`,
	} {
		err := checkScaleWorkloads([]string{"configmaps", w})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got error %v, want one with %q", w, err, want)
		}
	}
}

// scaleFixture is a scale curve of configmaps (with its floor) at N =
// 1,000, 10,000 and 100,000 and of parents at 1,000 and 10,000, two
// repeats: times grow
// tenfold with N, heap per object is fixed per contender, and converge's
// heap per object is 0.5× controller-runtime's but 0.8× at 100,000 for
// the configmaps, whose cache converge estimates at 900 bytes per object;
// client-go missed 500 parents at 10,000.
func scaleFixture() *Summary {
	names := []string{"converge", "controller-runtime", "client-go"}
	perObject := map[string]float64{"converge": 1000, "controller-runtime": 2000, "client-go": 1500}
	var results []*Result
	var floors []FloorRun
	plan := []scaleWorkload{{workload.ConfigMaps, []int{1000, 10000, 100000}}, {workload.Parents, []int{1000, 10000}}}
	for _, sw := range plan {
		k := sw.kind
		for _, n := range sw.sizes {
			for r := range 2 {
				for _, name := range names {
					heap := perObject[name] * float64(n)
					if name == "converge" && k == workload.ConfigMaps && n == 100000 {
						heap = 1600 * float64(n)
					}
					missed := 0
					if name == "client-go" && k == workload.Parents && n == 10000 {
						missed = 500
					}
					est := 0.0
					if name == "converge" && k == workload.ConfigMaps {
						est = 900 * float64(n)
					}
					results = append(results, &Result{Contender: name, Workload: string(k), Repeat: r, Objects: n,
						SyncSeconds: float64(n) / 10000 * (1 + float64(r)/10), SyncCPUSeconds: float64(n) / 20000,
						HeapBytes: heap, RSSBytes: 3 * heap, CacheEstimateBytes: est, Missed: missed})
				}
				if k == workload.ConfigMaps {
					floors = append(floors, FloorRun{Repeat: r, Objects: n, Seconds: float64(n) / 100000, CPUSeconds: float64(n) / 200000})
				}
			}
		}
	}
	sum := summarize(results, names, nil)
	sum.Command, sum.Repeats, sum.Workers = "make bench BENCH_ARGS='--sizes=1000,10000 --configmaps-sizes=1000,10000,100000'", 2, 4
	sum.Scale = summarizeScale(results, floors, names, plan)
	return sum
}

func TestRenderScale(t *testing.T) {
	sum := scaleFixture()
	table := renderTable(sum)
	for _, want := range []string{
		"### Scale",
		"Start-up of configmaps at N = 1,000, 10,000, 100,000; parents at N = 1,000, 10,000 (median of 2 run(s) each; the chart is scale.svg).",
		"#### configmaps",
		"| N | contender | time to all reconciled (s) | per 1,000 objects (s) | CPU to sync (s) | heap per object (bytes) | heap per added object (bytes) | RSS per object (bytes) | heap per object ÷ CR | missed | target |",
		"| 10,000 | floor | 0.10 | 0.010 | 0.05 | | | | | | |",
		// the median of 1.0 and 1.1 seconds; 1,000 bytes per object, 0.5×
		// CR's; at the smallest N nothing was added.
		"| 1,000 | converge | 0.11 | 0.105 | 0.05 | 1000 | | 3000 | 0.50× | 0 | ≤ 0.6× CR ✓ |",
		"| 10,000 | converge | 1.05 | 0.105 | 0.50 | 1000 | 1000 | 3000 | 0.50× | 0 | ≤ 0.6× CR ✓ |",
		"| 10,000 | controller-runtime | 1.05 | 0.105 | 0.50 | 2000 | 2000 | 6000 | | 0 | |",
		"| 10,000 | client-go | 1.05 | 0.105 | 0.50 | 1500 | 1500 | 4500 | 0.75× | 0 | |",
		// 160 MB at 100,000, 10 MB at 10,000.
		"| 100,000 | converge | 10.50 | 0.105 | 5.00 | 1600 | 1667 | 4800 | 0.80× | 0 | ≤ 0.6× CR ✗ |",
		// 900 bytes estimated per added object, against 1,000 and 1,667 measured.
		"converge's own estimate of its cache (converge_cache_bytes plus converge_cache_shared_bytes) ÷ the heap, per added object: 0.90 at N=10,000, 0.54 at N=100,000.",
		"Heap per object ≤ 0.6× CR at every N (3 of 3 sizes): ✗, converge ÷ CR 0.50× to 0.80×; not met: 0.80× at N=100,000. Why, with profiles: bench/results/analysis.md.",
		"#### parents",
		"| 10,000 | client-go | 1.05 | 0.105 | 0.50 | 1500 | 1500 | 4500 | 0.75× | 500 | |",
		"Heap per object ≤ 0.6× CR at every N (2 of 2 sizes): ✓, converge ÷ CR 0.50× to 0.50×.",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no line %q:\n%s", want, table)
		}
	}
	parents := table[strings.Index(table, "#### parents"):]
	if strings.Contains(parents, "floor") || strings.Contains(parents, "100,000") || strings.Contains(parents, "own estimate") {
		t.Errorf("the parents have no floor, no N=100,000 and no estimate:\n%s", parents)
	}
	if strings.Contains(table, "Partial") {
		t.Errorf("a final table is not partial:\n%s", table)
	}
	sum.Partial = "written after configmaps at N=1000"
	if table := renderTable(sum); !strings.Contains(table, "**Partial:** the run had not finished; written after configmaps at N=1000.") {
		t.Errorf("a partial table does not say so:\n%s", table)
	}
}

func TestSummarizeScaleLeavesOutWhatDidNotRun(t *testing.T) {
	results := []*Result{
		{Contender: "converge", Workload: "configmaps", Objects: 100, SyncSeconds: 1, HeapBytes: 100},
		{Contender: "client-go", Workload: "configmaps", Objects: 100, SyncSeconds: 1, HeapBytes: 100},
	}
	plan := []scaleWorkload{{workload.ConfigMaps, []int{100, 1000}}, {workload.Parents, []int{100, 1000}}}
	s := summarizeScale(results, nil, []string{"converge", "controller-runtime", "client-go"}, plan)
	if len(s.Points) != 2 || len(s.Targets) != 0 || len(s.Floor) != 0 {
		t.Errorf("got %d points, %d targets, %d floors; want 2, 0, 0", len(s.Points), len(s.Targets), len(s.Floor))
	}
	if p, _ := s.point("configmaps", 100, "converge"); p.HeapPerObject != 1 || p.SyncPer1000 != 10 {
		t.Errorf("per object: got %+v", p)
	}
}

func TestLogAxis(t *testing.T) {
	a := newLogAxis([]float64{2000, 50000, 0, math.NaN()}, 0, 300)
	if a.lo != 1000 || a.hi != 100000 {
		t.Fatalf("range %v..%v, want 1000..100000", a.lo, a.hi)
	}
	for v, want := range map[float64]float64{1000: 0, 10000: 150, 100000: 300} {
		if got := a.pos(v); math.Abs(got-want) > 1e-9 {
			t.Errorf("pos(%v) = %v, want %v", v, got, want)
		}
	}
	if got := newLogAxis([]float64{1000}, 0, 1); got.lo != 1000 || got.hi != 10000 {
		t.Errorf("one value: range %v..%v, want a decade from it", got.lo, got.hi)
	}
	if got, want := a.ticks(), []float64{1000, 2000, 5000, 10000, 20000, 50000, 100000}; !slices.Equal(got, want) {
		t.Errorf("ticks of two decades: %v, want %v", got, want)
	}
	if got, want := newLogAxis([]float64{0.02, 30}, 0, 1).ticks(), []float64{0.01, 0.1, 1, 10, 100}; !slices.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9*b }) {
		t.Errorf("ticks of four decades: %v, want %v", got, want)
	}
	// N: a tenth more than the sizes on either side, ticks within.
	x := tightLogAxis([]float64{1000, 50000}, 0, 100)
	if math.Abs(x.lo-1000/1.1) > 1e-9 || math.Abs(x.hi-55000) > 1e-9 {
		t.Errorf("tight: range %v..%v, want 909.09..55000", x.lo, x.hi)
	}
	if got, want := x.ticks(), []float64{1000, 2000, 5000, 10000, 20000, 50000}; !slices.Equal(got, want) {
		t.Errorf("tight ticks: %v, want %v", got, want)
	}
	if d1, d2 := x.pos(10000)-x.pos(1000), x.pos(100000)-x.pos(10000); math.Abs(d1-d2) > 1e-9 {
		t.Errorf("a decade is %v, then %v", d1, d2)
	}
	// Upside down, as the y axis is: larger values higher up.
	if y := newLogAxis([]float64{1, 100}, 200, 0); y.pos(10) != 100 || y.pos(100) != 0 {
		t.Errorf("y axis: pos(10) = %v, pos(100) = %v", y.pos(10), y.pos(100))
	}
}

func TestRenderScaleChart(t *testing.T) {
	svg := renderScaleChart(scaleFixture())
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>\n") {
		t.Fatalf("not an SVG document:\n%s", svg)
	}
	paths := regexp.MustCompile(`<path class="series" data-contender="([^"]+)" d="([^"]+)"`).FindAllStringSubmatch(svg, -1)
	per := map[string][]string{}
	for _, p := range paths {
		per[p[1]] = append(per[p[1]], p[2])
	}
	// one path per contender in each panel: 2 workloads × 3 panels; the
	// floor only in the configmaps time panel.
	for _, name := range []string{"converge", "controller-runtime", "client-go"} {
		if len(per[name]) != 2*len(scalePanels) {
			t.Errorf("%s: %d paths, want %d", name, len(per[name]), 2*len(scalePanels))
		}
		if !strings.Contains(svg, ">"+name+"</text>") {
			t.Errorf("no legend for %s", name)
		}
	}
	if len(per["floor"]) != 1 {
		t.Errorf("floor: %d paths, want 1", len(per["floor"]))
	}
	// client-go's point that missed parents is hollow.
	if !strings.Contains(svg, `fill="white" stroke="#718096"><title>client-go N=10,000: 1.05 (500 missed)</title>`) {
		t.Errorf("no hollow dot for client-go's parents at N=10,000:\n%s", svg)
	}
	// Log-log: N and the time grow tenfold from point to point, so in the
	// first panel every step of a line is the same on both axes.
	var pts [][2]float64
	for _, xy := range strings.Split(strings.TrimPrefix(per["floor"][0], "M"), " L") {
		x, y, _ := strings.Cut(xy, ",")
		fx, _ := strconv.ParseFloat(x, 64)
		fy, _ := strconv.ParseFloat(y, 64)
		pts = append(pts, [2]float64{fx, fy})
	}
	if len(pts) != 3 {
		t.Fatalf("the floor has %d points, want 3: %v", len(pts), per["floor"][0])
	}
	dx1, dx2 := pts[1][0]-pts[0][0], pts[2][0]-pts[1][0]
	dy1, dy2 := pts[1][1]-pts[0][1], pts[2][1]-pts[1][1]
	if dx1 <= 0 || math.Abs(dx1-dx2) > 0.2 || dy1 >= 0 || math.Abs(dy1-dy2) > 0.2 {
		t.Errorf("steps (%.1f, %.1f) then (%.1f, %.1f): want equal steps right and up", dx1, dy1, dx2, dy2)
	}
	// The heap per object panel of the parents: flat lines, of two points.
	heap := per["converge"][4]
	ys := regexp.MustCompile(`,([0-9.]+)`).FindAllStringSubmatch(heap, -1)
	if len(ys) != 2 || ys[0][1] != ys[1][1] {
		t.Errorf("converge's heap per parent is the same at every N, its line is not flat: %s", heap)
	}
}

// converge-compact is judged on the heap each object past the smaller N
// added, against controller-runtime's, with its own row goal; converge
// keeps its heap-per-object target.
func TestSummarizeScaleJudgesCompactPerAddedObject(t *testing.T) {
	var results []*Result
	for _, r := range []struct {
		name       string
		at10, at50 float64
	}{{"converge", 20e6, 84e6}, {compactContender, 15e6, 55e6}, {"controller-runtime", 29e6, 135e6}} {
		results = append(results,
			&Result{Contender: r.name, Workload: "configmaps", Objects: 10000, SyncSeconds: 1, HeapBytes: r.at10},
			&Result{Contender: r.name, Workload: "configmaps", Objects: 50000, SyncSeconds: 1, HeapBytes: r.at50})
	}
	names := []string{"converge", compactContender, "controller-runtime"}
	s := summarizeScale(results, nil, names, []scaleWorkload{{workload.ConfigMaps, []int{10000, 50000}}})
	var compact []target
	for _, tg := range s.Targets {
		if tg.Contender == compactContender {
			compact = append(compact, tg)
		}
	}
	// 40 MB over 40,000 objects against 106 MB: 1,000 ÷ 2,650 B.
	if len(compact) != 1 || compact[0].Objects != 50000 || math.Abs(compact[0].Ratio-1000.0/2650) > 1e-9 || !compact[0].Met {
		t.Fatalf("converge-compact targets %+v, want one at N=50,000 of ratio %.3f, met", compact, 1000.0/2650)
	}
	table := renderScale(&Summary{Order: names, Repeats: 1, Scale: s})
	if !strings.Contains(table, "| 50,000 | converge-compact |") || !strings.Contains(table, "heap per added object 0.38× CR, goal ≤ 0.5× CR ✓") {
		t.Errorf("the table lacks converge-compact's row or goal:\n%s", table)
	}
}

func TestReadCosts(t *testing.T) {
	replies := make(chan string, 1)
	replies <- "getP50=1.5 getP99=20 reconcileP50=6 reconcileP99=80 listMs=25 listed=50000 err=-"
	var asked strings.Builder
	var r Result
	if err := readCosts(&asked, replies, 50000, &r); err != nil {
		t.Fatal(err)
	}
	if asked.String() != "reads 50000\n" {
		t.Errorf("asked %q", asked.String())
	}
	if r.ReadGetP50Us != 1.5 || r.ReadGetP99Us != 20 || r.ReadReconcileP50Us != 6 || r.ReadReconcileP99Us != 80 || r.ReadListed != 50000 || r.ReadList1000Ms != 0.5 {
		t.Errorf("read costs %+v", r)
	}
	replies <- `getP50=1 err="get ns/x: not found"`
	if err := readCosts(&asked, replies, 1, &r); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a contender's failed read: %v, want its error", err)
	}
}
