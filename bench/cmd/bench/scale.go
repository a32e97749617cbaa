package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// The scale curve (--sizes): the configmaps and parents workloads run at
// several object counts, and their start-up figures per object.

// scaleDefaultWorkloads are the workloads of the scale curve when
// --workloads is not given.
const scaleDefaultWorkloads = "configmaps,parents"

// scaleHeapTarget is the goal at every N: converge's heap per object at
// most this times controller-runtime's.
const scaleHeapTarget = 0.6

// compactHeapTarget is the goal of converge-compact per workload: the heap
// each object past the next smaller N added, at most this times
// controller-runtime's. Per added object, so that each process's fixed
// heap (converge-compact's cache of decoded objects included) cancels.
var compactHeapTarget = map[workload.Kind]float64{workload.ConfigMaps: 0.5, workload.Pods: 0.35}

// parseSizes parses --sizes: comma-separated object counts, each at least
// 1 and given once. It returns them in ascending order, nil for "".
func parseSizes(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--sizes: %q is not an object count", f)
		}
		if n < 1 {
			return nil, fmt.Errorf("--sizes: %d: an object count is at least 1", n)
		}
		if slices.Contains(sizes, n) {
			return nil, fmt.Errorf("--sizes: %d is given twice", n)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return sizes, nil
}

// scaleWorkload is one workload of the scale curve and its sizes.
type scaleWorkload struct {
	kind  workload.Kind
	sizes []int
}

// scalePlan parses --sizes and the --<workload>-sizes of own (which
// replace it for their workload) into the workloads of the scale curve,
// in the order of workloads (nil: --workloads not given, then the
// workloads of the curve that have sizes). It returns nil when no sizes
// were given: the usual run.
func scalePlan(sizes string, own map[workload.Kind]string, workloads []string) ([]scaleWorkload, error) {
	common, err := parseSizes(sizes)
	if err != nil {
		return nil, err
	}
	of := map[workload.Kind][]int{}
	on := common != nil
	for _, k := range []workload.Kind{workload.ConfigMaps, workload.Parents} {
		ss, err := parseSizes(own[k])
		if err != nil {
			return nil, fmt.Errorf("--%s-%s", k, strings.TrimPrefix(err.Error(), "--"))
		}
		if ss == nil {
			ss = common
		}
		on = on || ss != nil
		of[k] = ss
	}
	if !on {
		return nil, nil
	}
	if workloads == nil {
		for _, k := range []workload.Kind{workload.ConfigMaps, workload.Parents} {
			if of[k] != nil {
				workloads = append(workloads, string(k))
			}
		}
	}
	if err := checkScaleWorkloads(workloads); err != nil {
		return nil, err
	}
	var plan []scaleWorkload
	for _, w := range workloads {
		k := workload.Kind(w)
		if of[k] == nil {
			return nil, fmt.Errorf("no sizes for %s: give --sizes or --%s-sizes", w, w)
		}
		plan = append(plan, scaleWorkload{kind: k, sizes: of[k]})
	}
	return plan, nil
}

// checkScaleWorkloads refuses, with --sizes, the workloads the scale curve
// does not run: it is drawn for the read workload of built-in objects
// (configmaps) and the write workload (parents).
func checkScaleWorkloads(ws []string) error {
	for _, w := range ws {
		switch w {
		case string(workload.ConfigMaps), string(workload.Parents):
		case string(workload.Pods), string(workload.Widgets), sharded:
			return fmt.Errorf("--sizes runs the scale curve of configmaps and parents only, not %s: run %s without --sizes (with --%s=N for its size)", w, w, sizeFlag(w))
		default:
			return fmt.Errorf("unknown workload %q (the scale curve runs %s)", w, scaleDefaultWorkloads)
		}
	}
	return nil
}

func sizeFlag(w string) string {
	if w == sharded {
		return "sharded-sizes"
	}
	return w
}

// scaleSummary is the scale curve: per workload, size and contender the
// medians of the start-up figures.
type scaleSummary struct {
	Sizes         []int            `json:"sizes"` // of every workload
	WorkloadSizes map[string][]int `json:"workloadSizes"`
	Workloads     []string         `json:"workloads"`
	Points        []scalePoint     `json:"points"`
	Floor         []scaleFloor     `json:"floor,omitempty"` // configmaps
	Targets       []target         `json:"targets"`         // heap per object, per workload and size
}

// scalePoint is one contender at one size of one workload (medians).
type scalePoint struct {
	Workload       string  `json:"workload"`
	Objects        int     `json:"objects"`
	Contender      string  `json:"contender"`
	Runs           int     `json:"runs"`
	SyncSeconds    float64 `json:"syncSeconds"`
	SyncPer1000    float64 `json:"syncSecondsPer1000"` // SyncSeconds per 1,000 objects
	SyncCPUSeconds float64 `json:"syncCpuSeconds"`
	HeapBytes      float64 `json:"heapBytes"`
	RSSBytes       float64 `json:"rssBytes"`
	HeapPerObject  float64 `json:"heapBytesPerObject"`
	// HeapPerAdded is the heap each object past the workload's next
	// smaller size added: (heap - heap there) / (N - N there); 0 at the
	// smallest size.
	HeapPerAdded float64 `json:"heapBytesPerAddedObject,omitempty"`
	// CacheEstimate is converge's own estimate of its cache's bytes
	// (Result.CacheEstimateBytes), and EstimatePerAdded its growth per
	// added object as HeapPerAdded is the heap's; 0 for other contenders.
	CacheEstimate    float64 `json:"cacheEstimateBytes,omitempty"`
	EstimatePerAdded float64 `json:"cacheEstimateBytesPerAddedObject,omitempty"`
	RSSPerObject     float64 `json:"rssBytesPerObject"`
	// Reads: medians of the reads phase (Result.Read*), 0 when it did
	// not run.
	ReadGetP50Us       float64 `json:"readGetP50Us,omitempty"`
	ReadGetP99Us       float64 `json:"readGetP99Us,omitempty"`
	ReadReconcileP50Us float64 `json:"readReconcileP50Us,omitempty"`
	ReadReconcileP99Us float64 `json:"readReconcileP99Us,omitempty"`
	ReadList1000Ms     float64 `json:"readList1000Ms,omitempty"`
	// Missed: objects (or updates) not reconciled within the deadline; the
	// other figures of a point that missed some are not of all N.
	Missed float64 `json:"missed"`
}

// scaleFloor is the floor of the configmaps workload at one size (medians).
type scaleFloor struct {
	Objects     int     `json:"objects"`
	Runs        int     `json:"runs"`
	Seconds     float64 `json:"seconds"`
	SyncPer1000 float64 `json:"secondsPer1000"`
	CPUSeconds  float64 `json:"cpuSeconds"`
}

// summarizeScale takes the medians of the runs at each size; a workload,
// size or contender without runs (yet) is left out.
func summarizeScale(results []*Result, floors []FloorRun, names []string, plan []scaleWorkload) *scaleSummary {
	s := &scaleSummary{WorkloadSizes: map[string][]int{}}
	for _, sw := range plan {
		k, w := sw.kind, string(sw.kind)
		s.Workloads = append(s.Workloads, w)
		s.WorkloadSizes[w] = sw.sizes
		for _, n := range sw.sizes {
			if !slices.Contains(s.Sizes, n) {
				s.Sizes = append(s.Sizes, n)
			}
		}
		for i, n := range sw.sizes {
			prevN := 0
			if i > 0 {
				prevN = sw.sizes[i-1]
			}
			heap, added := map[string]float64{}, map[string]float64{}
			for _, name := range names {
				var sync, cpu, hp, rss, est, missed []float64
				var reads [5][]float64
				for _, r := range results {
					if r.Workload == w && r.Objects == n && r.Contender == name {
						for i, v := range []float64{r.ReadGetP50Us, r.ReadGetP99Us, r.ReadReconcileP50Us, r.ReadReconcileP99Us, r.ReadList1000Ms} {
							reads[i] = append(reads[i], v)
						}
						sync, cpu = append(sync, r.SyncSeconds), append(cpu, r.SyncCPUSeconds)
						hp, rss, est = append(hp, r.HeapBytes), append(rss, r.RSSBytes), append(est, r.CacheEstimateBytes)
						missed = append(missed, float64(r.Missed))
					}
				}
				if len(sync) == 0 {
					continue
				}
				p := scalePoint{Workload: w, Objects: n, Contender: name, Runs: len(sync),
					SyncSeconds: median(sync), SyncCPUSeconds: median(cpu), HeapBytes: median(hp), RSSBytes: median(rss), CacheEstimate: median(est), Missed: median(missed)}
				p.ReadGetP50Us, p.ReadGetP99Us, p.ReadReconcileP50Us, p.ReadReconcileP99Us, p.ReadList1000Ms =
					median(reads[0]), median(reads[1]), median(reads[2]), median(reads[3]), median(reads[4])
				p.SyncPer1000 = p.SyncSeconds / float64(n) * 1000
				p.HeapPerObject, p.RSSPerObject = p.HeapBytes/float64(n), p.RSSBytes/float64(n)
				heap[name] = p.HeapPerObject
				if prev, ok := s.point(w, prevN, name); ok {
					p.HeapPerAdded = (p.HeapBytes - prev.HeapBytes) / float64(n-prevN)
					p.EstimatePerAdded = (p.CacheEstimate - prev.CacheEstimate) / float64(n-prevN)
					added[name] = p.HeapPerAdded
				}
				s.Points = append(s.Points, p)
			}
			conv, okConv := heap["converge"]
			cr, okCR := heap["controller-runtime"]
			if okConv && okCR {
				t := target{Workload: w, Metric: "heapPerObject", Against: "controller-runtime", AtMost: true, Value: scaleHeapTarget, Objects: n, Ratio: ratio(conv, cr)}
				t.Met = t.Ratio <= t.Value
				s.Targets = append(s.Targets, t)
			}
			compact, okCompact := added[compactContender]
			crAdded, okCR := added["controller-runtime"]
			if goal, ok := compactHeapTarget[k]; ok && okCompact && okCR {
				t := target{Contender: compactContender, Workload: w, Metric: "heapPerAddedObject", Against: "controller-runtime", AtMost: true, Value: goal, Objects: n, Ratio: ratio(compact, crAdded)}
				t.Met = t.Ratio <= t.Value
				s.Targets = append(s.Targets, t)
			}
			if k != workload.ConfigMaps {
				continue
			}
			var secs, cpu []float64
			for _, f := range floors {
				if f.Objects == n {
					secs, cpu = append(secs, f.Seconds), append(cpu, f.CPUSeconds)
				}
			}
			if len(secs) > 0 {
				f := scaleFloor{Objects: n, Runs: len(secs), Seconds: median(secs), CPUSeconds: median(cpu)}
				f.SyncPer1000 = f.Seconds / float64(n) * 1000
				s.Floor = append(s.Floor, f)
			}
		}
	}
	slices.Sort(s.Sizes)
	return s
}

// point returns the point of contender name at size n of workload w.
func (s *scaleSummary) point(w string, n int, name string) (scalePoint, bool) {
	for _, p := range s.Points {
		if p.Workload == w && p.Objects == n && p.Contender == name {
			return p, true
		}
	}
	return scalePoint{}, false
}

func (s *scaleSummary) floorAt(n int) (scaleFloor, bool) {
	for _, f := range s.Floor {
		if f.Objects == n {
			return f, true
		}
	}
	return scaleFloor{}, false
}

func (s *scaleSummary) targetAt(w string, n int, contender string) (target, bool) {
	if contender == "converge" {
		contender = ""
	}
	for _, t := range s.Targets {
		if t.Workload == w && t.Objects == n && t.Contender == contender {
			return t, true
		}
	}
	return target{}, false
}

// count renders n with thousands separators: 10,000.
func count(n int) string {
	d := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// renderScale renders the scale curve: per workload a row per size and
// contender (and the floor, for configmaps), and whether converge met the
// heap target at every size.
func renderScale(sum *Summary) string {
	s := sum.Scale
	var b strings.Builder
	var sizes []string
	for _, w := range s.Workloads {
		var ns []string
		for _, n := range s.WorkloadSizes[w] {
			ns = append(ns, count(n))
		}
		sizes = append(sizes, w+" at N = "+strings.Join(ns, ", "))
	}
	fmt.Fprintf(&b, "\n### Scale\n\n")
	fmt.Fprintf(&b, "Start-up of %s (median of %d run(s) each; the chart is scale.svg). ", strings.Join(sizes, "; "), sum.Repeats)
	b.WriteString("Heap and RSS per object are the figure after sync divided by N (parents: per parent, whose two children are cached too), ")
	b.WriteString("so they include each process's fixed cost and fall toward the cost of one more object as N grows; ")
	b.WriteString("heap per added object is the heap each object past the next smaller N added.\n")
	for _, w := range s.Workloads {
		fmt.Fprintf(&b, "\n#### %s\n\n", w)
		b.WriteString("| N | contender | time to all reconciled (s) | per 1,000 objects (s) | CPU to sync (s) | heap per object (bytes) | heap per added object (bytes) | RSS per object (bytes) | heap per object ÷ CR | missed | target |\n")
		b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, n := range s.WorkloadSizes[w] {
			if f, ok := s.floorAt(n); ok && w == string(workload.ConfigMaps) {
				row(&b, count(n), "floor", fmt.Sprintf("%.2f", f.Seconds), fmt.Sprintf("%.3f", f.SyncPer1000), fmt.Sprintf("%.2f", f.CPUSeconds), "", "", "", "", "", "")
			}
			cr, hasCR := s.point(w, n, "controller-runtime")
			for _, name := range sum.Order {
				p, ok := s.point(w, n, name)
				if !ok {
					continue
				}
				vs := ""
				if hasCR && name != "controller-runtime" {
					vs = fmt.Sprintf("%.2f×", ratio(p.HeapPerObject, cr.HeapPerObject))
				}
				added := ""
				if p.HeapPerAdded != 0 {
					added = fmt.Sprintf("%.0f", p.HeapPerAdded)
				}
				goal := ""
				if t, ok := s.targetAt(w, n, name); ok {
					goal = t.describe() + " " + mark(t.Met)
					if t.Contender != "" {
						goal = fmt.Sprintf("heap per added object %.2f× CR, goal %s", t.Ratio, goal)
					}
				}
				row(&b, count(n), name, fmt.Sprintf("%.2f", p.SyncSeconds), fmt.Sprintf("%.3f", p.SyncPer1000), fmt.Sprintf("%.2f", p.SyncCPUSeconds),
					fmt.Sprintf("%.0f", p.HeapPerObject), added, fmt.Sprintf("%.0f", p.RSSPerObject), vs, fmt.Sprintf("%.0f", p.Missed), goal)
			}
		}
		var est []string
		for _, n := range s.WorkloadSizes[w] {
			if p, ok := s.point(w, n, "converge"); ok && p.EstimatePerAdded != 0 && p.HeapPerAdded != 0 {
				est = append(est, fmt.Sprintf("%.2f at N=%s", p.EstimatePerAdded/p.HeapPerAdded, count(n)))
			}
		}
		if len(est) > 0 {
			fmt.Fprintf(&b, "\nconverge's own estimate of its cache (converge_cache_bytes plus converge_cache_shared_bytes) ÷ the heap, per added object: %s.\n", strings.Join(est, ", "))
		}
		b.WriteString(renderScaleReads(s, sum.Order, w))
		var ts []target
		for _, t := range s.Targets {
			if t.Workload == w && t.Contender == "" {
				ts = append(ts, t)
			}
		}
		if len(ts) == 0 {
			continue
		}
		met, lo, hi := true, math.Inf(1), math.Inf(-1)
		var missed []string
		for _, t := range ts {
			met = met && t.Met
			lo, hi = math.Min(lo, t.Ratio), math.Max(hi, t.Ratio)
			if !t.Met {
				missed = append(missed, fmt.Sprintf("%.2f× at N=%s", t.Ratio, count(t.Objects)))
			}
		}
		fmt.Fprintf(&b, "\nHeap per object %s at every N (%d of %d sizes): %s, converge ÷ CR %.2f× to %.2f×", ts[0].describe(), len(ts), len(s.WorkloadSizes[w]), mark(met), lo, hi)
		if len(missed) > 0 {
			fmt.Fprintf(&b, "; not met: %s. %s\n", strings.Join(missed, ", "), whyMissed)
			continue
		}
		b.WriteString(".\n")
	}
	return b.String()
}

// row writes a table row; an empty cell is "| |".
func row(b *strings.Builder, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		if c != "" {
			b.WriteString(" " + c)
		}
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

func mark(met bool) string {
	if met {
		return "✓"
	}
	return "✗"
}

// logAxis maps values on a log scale onto pixels from..to: lo and hi are
// the powers of ten around the values.
type logAxis struct {
	lo, hi   float64
	from, to float64
}

// newLogAxis spans the positive, finite values of vs (1 to 10 when there
// are none), widened to whole decades.
func newLogAxis(vs []float64, from, to float64) logAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	a := logAxis{lo: math.Pow(10, math.Floor(math.Log10(lo)+1e-9)), hi: math.Pow(10, math.Ceil(math.Log10(hi)-1e-9)), from: from, to: to}
	if a.hi <= a.lo {
		a.hi = a.lo * 10
	}
	return a
}

// tightLogAxis spans the values of vs and a tenth more on either side:
// for N, whose values the figures are at.
func tightLogAxis(vs []float64, from, to float64) logAxis {
	a := newLogAxis(vs, from, to)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if !math.IsInf(lo, 1) {
		a.lo, a.hi = lo/1.1, hi*1.1
	}
	return a
}

func (a logAxis) pos(v float64) float64 {
	return a.from + (math.Log10(v)-math.Log10(a.lo))/(math.Log10(a.hi)-math.Log10(a.lo))*(a.to-a.from)
}

// ticks are the powers of ten within the axis, and 2 and 5 times them
// when it spans at most two decades.
func (a logAxis) ticks() []float64 {
	few := a.hi/a.lo <= 100.0001
	var ts []float64
	for d := math.Pow(10, math.Floor(math.Log10(a.lo))); d <= a.hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * d; (m == 1 || few) && v >= a.lo*0.9999 && v <= a.hi*1.0001 {
				ts = append(ts, v)
			}
		}
	}
	return ts
}

// siLabel renders a tick: 0.1, 2, 50, 1k, 20k, 1M.
func siLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

var scaleColors = map[string]string{
	"converge":           "#2b6cb0",
	compactContender:     "#63b3ed",
	"controller-runtime": "#dd6b20",
	"client-go":          "#718096",
	"floor":              "#222",
}

// scalePanel is one panel of the scale chart: a figure of a point.
type scalePanel struct {
	title string
	get   func(scalePoint) float64
	floor bool // the configmaps floor's time is drawn too
}

var scalePanels = []scalePanel{
	{"time to all reconciled (s)", func(p scalePoint) float64 { return p.SyncSeconds }, true},
	{"heap per object (bytes)", func(p scalePoint) float64 { return p.HeapPerObject }, false},
	{"RSS per object (bytes)", func(p scalePoint) float64 { return p.RSSPerObject }, false},
}

// renderScaleChart draws the scale curve: a row of panels per workload
// (time to all reconciled, heap and RSS per object), log-log, x = N, one
// line per contender; in the configmaps time panel the floor as a dashed
// line.
func renderScaleChart(sum *Summary) string {
	s := sum.Scale
	const (
		left, top, panelW, panelH, gapX, gapY = 70, 70, 260, 190, 80, 70
	)
	width := left + len(scalePanels)*(panelW+gapX)
	height := top + len(s.Workloads)*(panelH+gapY) + 10
	var sizes []float64
	for _, n := range s.Sizes {
		sizes = append(sizes, float64(n))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Cost by object count N (log-log; lower is better)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">%s — median of %d, %d workers</text>`+"\n", esc(sum.Command), sum.Repeats, sum.Workers)
	legend := slices.Clone(sum.Order)
	if len(s.Floor) > 0 {
		legend = append(legend, "floor")
	}
	for i, n := range legend {
		lx := 10 + i*150
		dash := ""
		if n == "floor" {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="52" x2="%d" y2="52" stroke="%s" stroke-width="2"%s/><text x="%d" y="56">%s</text>`+"\n", lx, lx+20, scaleColors[n], dash, lx+26, esc(n))
	}
	fmt.Fprintf(&b, `<circle cx="%d" cy="52" r="3" fill="white" stroke="#555"/><text x="%d" y="56" fill="#555">some objects not reconciled within the deadline</text>`+"\n", 10+len(legend)*150, 16+len(legend)*150)
	for row, w := range s.Workloads {
		y0 := float64(top + row*(panelH+gapY) + 20)
		for col, panel := range scalePanels {
			x0 := float64(left + col*(panelW+gapX))
			xa := tightLogAxis(sizes, x0, x0+panelW)
			var vs []float64
			for _, p := range s.Points {
				if p.Workload == w {
					vs = append(vs, panel.get(p))
				}
			}
			withFloor := panel.floor && w == string(workload.ConfigMaps) && len(s.Floor) > 0
			if withFloor {
				for _, f := range s.Floor {
					vs = append(vs, f.Seconds)
				}
			}
			ya := newLogAxis(vs, y0+panelH, y0)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s: %s</text>`+"\n", x0, y0-8, w, esc(panel.title))
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="none" stroke="#cbd5e0"/>`+"\n", x0, y0, panelW, panelH)
			for _, t := range xa.ticks() {
				xx := xa.pos(t)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#edf2f7"/>`+"\n", xx, y0, xx, y0+panelH)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", xx, y0+panelH+14, siLabel(t))
			}
			for _, t := range ya.ticks() {
				yy := ya.pos(t)
				fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#edf2f7"/>`+"\n", x0, yy, x0+panelW, yy)
				fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-4, yy+4, siLabel(t))
			}
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">N</text>`+"\n", x0+panelW/2, y0+panelH+28)
			// line draws a contender's points: N, the value and what it
			// missed (a hollow dot: not every object was reconciled).
			line := func(name string, pts [][3]float64) {
				var d []string
				var dots strings.Builder
				for _, p := range pts {
					if p[1] <= 0 || math.IsInf(p[1], 0) || math.IsNaN(p[1]) {
						continue
					}
					x, y := xa.pos(p[0]), ya.pos(p[1])
					d = append(d, fmt.Sprintf("%.1f,%.1f", x, y))
					fill, note := scaleColors[name], ""
					if p[2] > 0 {
						fill, note = "white", fmt.Sprintf(" (%.0f missed)", p[2])
					}
					fmt.Fprintf(&dots, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" stroke="%s"><title>%s N=%s: %.4g%s</title></circle>`+"\n",
						x, y, fill, scaleColors[name], esc(name), count(int(p[0])), p[1], note)
				}
				if len(d) == 0 {
					return
				}
				dash := ""
				if name == "floor" {
					dash = ` stroke-dasharray="5,3"`
				}
				fmt.Fprintf(&b, `<path class="series" data-contender="%s" d="M%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", esc(name), strings.Join(d, " L"), scaleColors[name], dash)
				b.WriteString(dots.String())
			}
			for _, name := range sum.Order {
				var pts [][3]float64
				for _, n := range s.Sizes {
					if p, ok := s.point(w, n, name); ok {
						pts = append(pts, [3]float64{float64(n), panel.get(p), p.Missed})
					}
				}
				line(name, pts)
			}
			if withFloor {
				var pts [][3]float64
				for _, f := range s.Floor {
					pts = append(pts, [3]float64{float64(f.Objects), f.Seconds, 0})
				}
				line("floor", pts)
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// renderScaleReads renders the reads phase of workload w per N and
// contender, or "" when it did not run.
func renderScaleReads(s *scaleSummary, order []string, w string) string {
	var b strings.Builder
	for _, n := range s.WorkloadSizes[w] {
		for _, name := range order {
			p, ok := s.point(w, n, name)
			if !ok || p.ReadGetP50Us == 0 {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("\nRead costs on the synced cache, each the way the contender's reconcile reads (bench/README.md): ")
				b.WriteString("Gets of random keys, a reconcile's four Gets (its object and three children), and a List of every object per 1,000 listed.\n\n")
				b.WriteString("| N | contender | Get p50 (µs) | Get p99 (µs) | reconcile p50 (µs) | reconcile p99 (µs) | List per 1,000 objects (ms) |\n")
				b.WriteString("|--:|---|--:|--:|--:|--:|--:|\n")
			}
			row(&b, count(n), name, fmt.Sprintf("%.2f", p.ReadGetP50Us), fmt.Sprintf("%.2f", p.ReadGetP99Us),
				fmt.Sprintf("%.2f", p.ReadReconcileP50Us), fmt.Sprintf("%.2f", p.ReadReconcileP99Us), fmt.Sprintf("%.3f", p.ReadList1000Ms))
		}
	}
	return b.String()
}
