package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// metric is one figure of the table.
type metric struct {
	Key          string
	Label        string
	HigherBetter bool
	get          func(*Result) float64
	format       string // fmt verb for one value
	chart        bool   // drawn in the chart
	scope        scope  // the workloads it is measured on
	hideZero     bool   // left out of a workload's table where every contender has 0
}

// scope says which workloads a metric is measured on.
type scope int

const (
	allWorkloads  scope = iota
	readWorkloads       // configmaps, pods, widgets
	writeWorkload       // parents
)

func (s scope) has(k string) bool {
	switch s {
	case readWorkloads:
		return k != string(workload.Parents)
	case writeWorkload:
		return k == string(workload.Parents)
	}
	return true
}

const mib = 1 << 20

var metrics = []metric{
	{"sync", "time to all reconciled (s)", false, func(r *Result) float64 { return r.SyncSeconds }, "%.2f", true, allWorkloads, false},
	{"cpu", "CPU, whole run (s)", false, func(r *Result) float64 { return r.CPUSeconds }, "%.2f", true, allWorkloads, false},
	{"syncCpu", "CPU to sync (s)", false, func(r *Result) float64 { return r.SyncCPUSeconds }, "%.2f", false, allWorkloads, false},
	{"heap", "heap after sync (MiB)", false, func(r *Result) float64 { return r.HeapBytes / mib }, "%.1f", true, allWorkloads, false},
	{"rss", "RSS after sync (MiB)", false, func(r *Result) float64 { return r.RSSBytes / mib }, "%.1f", true, allWorkloads, false},
	{"peakRss", "peak RSS (MiB)", false, func(r *Result) float64 { return r.PeakRSSBytes / mib }, "%.1f", false, allWorkloads, false},
	{"syncPeakHeap", "peak heap during sync (MiB)", false, func(r *Result) float64 { return r.SyncPeakHeapBytes / mib }, "%.1f", false, readWorkloads, true},
	{"listPeakHeap", "peak heap before the first reconcile (MiB)", false, func(r *Result) float64 { return r.ListPeakHeapBytes / mib }, "%.1f", false, readWorkloads, true},
	{"syncPeakRatio", "peak heap during sync ÷ heap after sync", false, syncPeakRatio, "%.2f", false, readWorkloads, true},
	{"syncPeakLive", "peak live heap during sync (MiB)", false, func(r *Result) float64 { return r.SyncPeakLiveBytes / mib }, "%.1f", false, readWorkloads, true},
	{"syncPeakGoal", "peak heap goal during sync (MiB)", false, func(r *Result) float64 { return r.SyncPeakGoalBytes / mib }, "%.1f", false, readWorkloads, true},
	{"syncGCs", "GC cycles to sync (n)", false, func(r *Result) float64 { return r.SyncGCs }, "%.0f", false, readWorkloads, true},
	{"syncPeakRss", "peak RSS by sync (MiB)", false, func(r *Result) float64 { return r.SyncPeakRSSBytes / mib }, "%.1f", false, readWorkloads, true},
	{"updateP50", "update p50 at fixed rate (ms)", false, func(r *Result) float64 { return r.UpdateP50Ms }, "%.1f", false, readWorkloads, false},
	{"updateP99", "update p99 at fixed rate (ms)", false, func(r *Result) float64 { return r.UpdateP99Ms }, "%.1f", true, readWorkloads, false},
	{"updateMax", "update max at fixed rate (ms)", false, func(r *Result) float64 { return r.UpdateMaxMs }, "%.1f", false, readWorkloads, false},
	{"stormP50", "startup-storm p50 (ms)", false, func(r *Result) float64 { return r.StormP50Ms }, "%.0f", false, readWorkloads, false},
	{"stormP99", "startup-storm p99 (ms)", false, func(r *Result) float64 { return r.StormP99Ms }, "%.0f", true, readWorkloads, false},
	{"stormCount", "startup-storm changes (n)", false, func(r *Result) float64 { return float64(r.StormCount) }, "%.0f", false, readWorkloads, false},
	{"burst", "burst throughput (updates/s)", true, func(r *Result) float64 { return r.BurstPerSec }, "%.0f", false, readWorkloads, false},
	{"backlog", "backlog drain (updates/s)", true, func(r *Result) float64 { return r.BacklogPerSec }, "%.0f", true, readWorkloads, false},
	{"backlogCpu", "CPU to drain the backlog (s)", false, func(r *Result) float64 { return r.BacklogCPU }, "%.2f", false, readWorkloads, false},
	{"readGetP50", "reads: Get p50, random keys (µs)", false, func(r *Result) float64 { return r.ReadGetP50Us }, "%.2f", false, readWorkloads, true},
	{"readGetP99", "reads: Get p99, random keys (µs)", false, func(r *Result) float64 { return r.ReadGetP99Us }, "%.2f", false, readWorkloads, true},
	{"readReconcileP50", "reads: reconcile of 4 Gets p50 (µs)", false, func(r *Result) float64 { return r.ReadReconcileP50Us }, "%.2f", false, readWorkloads, true},
	{"readReconcileP99", "reads: reconcile of 4 Gets p99 (µs)", false, func(r *Result) float64 { return r.ReadReconcileP99Us }, "%.2f", false, readWorkloads, true},
	{"readList1000", "reads: List, per 1,000 objects (ms)", false, func(r *Result) float64 { return r.ReadList1000Ms }, "%.3f", false, readWorkloads, true},
	{"shutdown", "shutdown (s)", false, func(r *Result) float64 { return r.ShutdownSeconds }, "%.3f", false, allWorkloads, false},
	{"missed", "updates missed", false, func(r *Result) float64 { return float64(r.Missed) }, "%.0f", false, allWorkloads, false},
}

func init() { metrics = append(metrics, parentMetrics()...) }

// parentMetrics are the figures of the parents workload: writes and
// requests per phase (by verb, from kube-apiserver's metrics), and the time
// each phase took to converge.
func parentMetrics() []metric {
	perParent := func(f func(*Result) float64) func(*Result) float64 {
		return func(r *Result) float64 {
			if r.Objects == 0 {
				return 0
			}
			return f(r) / float64(r.Objects)
		}
	}
	m := func(key, label string, get func(*Result) float64, format string) metric {
		return metric{Key: key, Label: label, get: get, format: format, scope: writeWorkload}
	}
	verbs := func(phase, label string) []metric {
		var ms []metric
		for _, v := range requestVerbs {
			ms = append(ms, metric{Key: phase + "Requests" + v, Label: label + " " + v, format: "%.0f", scope: writeWorkload, hideZero: true,
				get: func(r *Result) float64 { return r.Requests[phase][v] }})
		}
		return append(ms, metric{Key: phase + "Conflicts", Label: label + " answered 409 Conflict", format: "%.0f", scope: writeWorkload, hideZero: true,
			get: func(r *Result) float64 { return r.Conflicts[phase] }})
	}
	ms := []metric{
		m("syncWrites", "writes to converge (n)", func(r *Result) float64 { return r.SyncWrites }, "%.0f"),
		m("syncWritesPerParent", "writes per parent to converge", perParent(func(r *Result) float64 { return r.SyncWrites }), "%.2f"),
		m("syncQuiet", "start to the last write (s)", func(r *Result) float64 { return r.SyncQuietSeconds }, "%.2f"),
	}
	ms = append(ms, verbs("sync", "requests to converge:")...)
	ms = append(ms,
		m("idleWrites", "writes while idle (n)", func(r *Result) float64 { return r.IdleWrites }, "%.0f"),
		m("idleWritesPerParent", "writes per parent while idle", perParent(func(r *Result) float64 { return r.IdleWrites }), "%.2f"),
		m("rolloutCm", "rollout: every ConfigMap updated (s)", func(r *Result) float64 { return r.RolloutCMSeconds }, "%.2f"),
		m("rollout", "rollout: every parent converged (s)", func(r *Result) float64 { return r.RolloutSeconds }, "%.2f"),
		m("rolloutQuiet", "rollout: first patch to the last write (s)", func(r *Result) float64 { return r.RolloutQuietSeconds }, "%.2f"),
		m("rolloutCpu", "rollout: CPU (s)", func(r *Result) float64 { return r.RolloutCPU }, "%.2f"),
		m("rolloutWrites", "rollout: writes (n)", func(r *Result) float64 { return r.RolloutWrites }, "%.0f"),
		m("rolloutWritesPerParent", "rollout: writes per parent", perParent(func(r *Result) float64 { return r.RolloutWrites }), "%.2f"),
	)
	ms = append(ms, verbs("rollout", "rollout requests:")...)
	ms = append(ms,
		m("drifted", "drift: ConfigMaps changed by hand (n)", func(r *Result) float64 { return float64(r.Drifted) }, "%.0f"),
		m("drift", "drift: every one reverted (s)", func(r *Result) float64 { return r.DriftSeconds }, "%.2f"),
		m("driftQuiet", "drift: first change to the last write (s)", func(r *Result) float64 { return r.DriftQuietSeconds }, "%.2f"),
		m("driftWrites", "drift: writes (n)", func(r *Result) float64 { return r.DriftWrites }, "%.0f"),
	)
	return append(ms, verbs("drift", "drift requests:")...)
}

// target is one performance goal: a contender's figure (converge's unless
// Contender says otherwise) divided by a rival's.
type target struct {
	// Contender is the contender judged; "" is converge.
	Contender string  `json:"contender,omitempty"`
	Workload  string  `json:"workload"`
	Metric    string  `json:"metric"`
	Against   string  `json:"against"` // contender, or "" for an absolute bound
	AtMost    bool    `json:"atMost"`  // ratio <= Value, else ratio >= Value
	Value     float64 `json:"value"`
	Ratio     float64 `json:"ratio"`
	Met       bool    `json:"met"`
	Objects   int     `json:"objects,omitempty"` // the scale curve and sharded: the N it is checked at
	// Plane and Members: sharded, the plane it is checked on and the
	// ring's members.
	Plane   string `json:"plane,omitempty"`
	Members int    `json:"members,omitempty"`
}

func targetsFor(k workload.Kind) []target {
	w := string(k)
	cr := "controller-runtime"
	if k == workload.Parents {
		return []target{
			{Workload: w, Metric: "sync", Against: cr, AtMost: true, Value: 0.7},
			{Workload: w, Metric: "idleWrites", AtMost: true, Value: 0},
			{Workload: w, Metric: "missed", AtMost: true, Value: 0},
		}
	}
	ts := []target{
		{Workload: w, Metric: "sync", Against: cr, AtMost: true, Value: 0.6},
		{Workload: w, Metric: "sync", Against: "client-go", AtMost: true, Value: 1.1},
		{Workload: w, Metric: "cpu", Against: cr, AtMost: true, Value: 0.6},
		{Workload: w, Metric: "rss", Against: cr, AtMost: true, Value: 0.7},
		{Workload: w, Metric: "backlog", Against: cr, AtMost: false, Value: 2},
		{Workload: w, Metric: "backlog", Against: "client-go", AtMost: false, Value: 1},
		{Workload: w, Metric: "updateP99", Against: cr, AtMost: true, Value: 1.0},
		{Workload: w, Metric: "stormP99", Against: cr, AtMost: true, Value: 0.5},
		{Workload: w, Metric: "missed", AtMost: true, Value: 0},
	}
	switch k {
	case workload.Pods:
		ts = append(ts, target{Workload: w, Metric: "heap", Against: cr, AtMost: true, Value: 0.6})
	case workload.ConfigMaps:
		ts = append(ts, target{Workload: w, Metric: "heap", Against: cr, AtMost: true, Value: 0.85})
	case workload.Widgets:
		ts[2].Value = 0.5 // the custom-resource row: CPU <= 0.5x
	}
	return ts
}

// Summary is the medians per workload and contender, and the targets.
type Summary struct {
	Command   string                                   `json:"command"`
	Date      string                                   `json:"date"`
	Elapsed   string                                   `json:"elapsed"`
	Workers   int                                      `json:"workers"`
	Repeats   int                                      `json:"repeats"`
	CBOR      bool                                     `json:"cborServing"`
	Order     []string                                 `json:"contenders"`
	Workloads []string                                 `json:"workloads"`
	Objects   map[string]int                           `json:"objects"`
	Medians   map[string]map[string]map[string]float64 `json:"medians"` // workload -> contender -> metric
	Targets   []target                                 `json:"targets"`
	Machine   string                                   `json:"machine"`
	Floor     *floorSummary                            `json:"floor,omitempty"`
	Sharded   []*shardedSummary                        `json:"sharded,omitempty"` // per plane and N
	Scale     *scaleSummary                            `json:"scale,omitempty"`
	Fleet     *FleetRun                                `json:"fleet,omitempty"`
	// Partial is set while the run is still going: the files then hold
	// what was measured so far.
	Partial string `json:"partial,omitempty"`
}

// loadAverage is the 1-minute load average, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// machine describes what the run shared: the cores and the load average
// before and after it.
func machine(loadStart string) string {
	return fmt.Sprintf("%d cores, shared with the control plane and with whatever else ran: 1-minute load average %s at the start, %s at the end",
		runtime.NumCPU(), loadStart, loadAverage())
}

func summarize(results []*Result, names []string, kinds []workload.Kind) *Summary {
	s := &Summary{Order: names, Objects: map[string]int{}, Medians: map[string]map[string]map[string]float64{}}
	for _, k := range kinds {
		w := string(k)
		s.Workloads = append(s.Workloads, w)
		s.Medians[w] = map[string]map[string]float64{}
		for _, n := range names {
			med := map[string]float64{}
			for _, m := range metrics {
				if !m.scope.has(w) {
					continue
				}
				var vs []float64
				for _, r := range results {
					if r.Workload == w && r.Contender == n {
						vs = append(vs, m.get(r))
						s.Objects[w] = r.Objects
					}
				}
				med[m.Key] = median(vs)
			}
			s.Medians[w][n] = med
		}
		if !slices.Contains(names, "converge") {
			continue
		}
		for _, t := range targetsFor(k) {
			conv := s.Medians[w]["converge"][t.Metric]
			if t.Against == "" {
				t.Ratio = conv
			} else {
				rival, ok := s.Medians[w][t.Against]
				if !ok {
					continue
				}
				t.Ratio = ratio(conv, rival[t.Metric])
			}
			if t.AtMost {
				t.Met = t.Ratio <= t.Value
			} else {
				t.Met = t.Ratio >= t.Value
			}
			s.Targets = append(s.Targets, t)
		}
	}
	return s
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

func metricByKey(k string) metric {
	for _, m := range metrics {
		if m.Key == k {
			return m
		}
	}
	panic("no metric " + k)
}

func (t target) describe() string {
	op := "≥"
	if t.AtMost {
		op = "≤"
	}
	if t.Against == "" {
		return fmt.Sprintf("%s %g", op, t.Value)
	}
	return fmt.Sprintf("%s %g× %s", op, t.Value, short(t.Against))
}

func short(contender string) string {
	if contender == "controller-runtime" {
		return "CR"
	}
	return contender
}

// renderTable renders the medians, the ratios against controller-runtime and
// the targets as Markdown.
func renderTable(s *Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## converge vs controller-runtime vs client-go\n\n")
	fmt.Fprintf(&b, "`%s` — %s, %d workers per contender, median of %d run(s) each, CBOR serving %v, took %s.\n",
		s.Command, s.Date, s.Workers, s.Repeats, s.CBOR, s.Elapsed)
	fmt.Fprintf(&b, "Machine: %s. Wall-clock figures are noisy (see bench/README.md).\n", s.Machine)
	if s.Partial != "" {
		fmt.Fprintf(&b, "\n**Partial:** the run had not finished; %s.\n", s.Partial)
	}
	hasCR := slices.Contains(s.Order, "controller-runtime")
	for _, w := range s.Workloads {
		fmt.Fprintf(&b, "\n### %s (N=%d)\n\n| metric |", w, s.Objects[w])
		for _, n := range s.Order {
			fmt.Fprintf(&b, " %s |", n)
		}
		if hasCR {
			for _, n := range s.Order {
				if n != "controller-runtime" {
					fmt.Fprintf(&b, " %s ÷ CR |", n)
				}
			}
		}
		b.WriteString(" target |\n|---|")
		cols := len(s.Order) + 1
		if hasCR {
			cols += len(s.Order) - 1
		}
		b.WriteString(strings.Repeat("--:|", cols) + "\n")
		for _, m := range metrics {
			if !m.scope.has(w) {
				continue
			}
			if m.hideZero && !slices.ContainsFunc(s.Order, func(n string) bool { return s.Medians[w][n][m.Key] != 0 }) {
				continue
			}
			fmt.Fprintf(&b, "| %s |", m.Label)
			for _, n := range s.Order {
				fmt.Fprintf(&b, " "+m.format+" |", s.Medians[w][n][m.Key])
			}
			if hasCR {
				cr := s.Medians[w]["controller-runtime"][m.Key]
				for _, n := range s.Order {
					if n != "controller-runtime" {
						fmt.Fprintf(&b, " %.2f× |", ratio(s.Medians[w][n][m.Key], cr))
					}
				}
			}
			var goals []string
			for _, t := range s.Targets {
				if t.Workload == w && t.Metric == m.Key {
					mark := "✗"
					if t.Met {
						mark = "✓"
					}
					goals = append(goals, t.describe()+" "+mark)
				}
			}
			fmt.Fprintf(&b, " %s |\n", strings.Join(goals, ", "))
		}
		if w == string(workload.ConfigMaps) && s.Floor != nil {
			b.WriteString(renderFloor(s))
		}
	}
	if len(s.Sharded) > 0 {
		b.WriteString(renderShardedCurve(s.Sharded, s.Targets))
		for _, sh := range s.Sharded {
			b.WriteString(renderSharded(sh))
		}
	}
	if s.Scale != nil {
		b.WriteString(renderScale(s))
	}
	if s.Fleet != nil {
		b.WriteString(renderFleet(s.Fleet))
	}
	if len(s.Targets) > 0 {
		met := 0
		for _, t := range s.Targets {
			if t.Met {
				met++
			}
		}
		fmt.Fprintf(&b, "\nTargets met: %d of %d.", met, len(s.Targets))
		var missed []string
		why := whyMissed
		for _, t := range s.Targets {
			if !t.Met && t.Workload == fleetName {
				why = whyMissedFleet
			}
		}
		for _, t := range s.Targets {
			if !t.Met {
				w := t.Workload
				if t.Plane != "" {
					w = fmt.Sprintf("%s (%s plane, N=%s, %d members)", w, t.Plane, count(t.Objects), t.Members)
				}
				missed = append(missed, fmt.Sprintf("%s %s %.2f (goal %s)", w, t.Metric, t.Ratio, t.describe()))
			}
		}
		if len(missed) > 0 {
			fmt.Fprintf(&b, " Not met: %s. %s", strings.Join(missed, "; "), why)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// whyMissed points from a missed target to the hand-written explanation,
// with profiles, in the repository.
const whyMissed = "Why, with profiles: bench/results/analysis.md."

// whyMissedFleet points from a missed target of the fleet workload to
// what bench/README.md says of it.
const whyMissedFleet = "Why: bench/README.md, \"The fleet workload\"; the other workloads' misses: bench/results/analysis.md."

// renderChart draws, per workload, how many times better than
// controller-runtime converge and client-go are on the charted metrics
// (higher is better; log scale), with each target as a red tick.
func renderChart(s *Summary) string {
	var chartMetrics []metric
	for _, m := range metrics {
		if m.chart {
			chartMetrics = append(chartMetrics, m)
		}
	}
	var others []string
	for _, n := range s.Order {
		if n != "controller-runtime" {
			others = append(others, n)
		}
	}
	const (
		left, panelW, barH, gap, top = 190, 300, 9, 8, 56
		lo, hi                       = 0.25, 16.0
	)
	rowH := barH*len(others) + gap
	panelH := rowH*len(chartMetrics) + 30
	width := left + (panelW+40)*len(s.Workloads) + 10
	height := top + panelH + 50
	x := func(v float64) float64 {
		v = math.Max(lo, math.Min(hi, v))
		return math.Log(v/lo) / math.Log(hi/lo) * panelW
	}
	colors := map[string]string{"converge": "#2b6cb0", compactContender: "#63b3ed", "client-go": "#a0aec0"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Times better than controller-runtime (higher is better, log scale)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">%s — median of %d, %d workers; red tick = target</text>`+"\n", esc(s.Command), s.Repeats, s.Workers)
	for i, m := range chartMetrics {
		y := top + 24 + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH*len(others)/2+4, esc(m.Label))
	}
	for p, w := range s.Workloads {
		x0 := float64(left + p*(panelW+40))
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s (N=%d)</text>`+"\n", x0, top+10, w, s.Objects[w])
		for _, t := range []float64{0.25, 0.5, 1, 2, 4, 8, 16} {
			xx := x0 + x(t)
			stroke := "#e2e8f0"
			if t == 1 {
				stroke = "#333"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xx, top+18, xx, top+panelH, stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g×</text>`+"\n", xx, top+panelH+14, t)
		}
		cr := s.Medians[w]["controller-runtime"]
		for i, m := range chartMetrics {
			if !m.scope.has(w) {
				continue
			}
			y := top + 24 + i*rowH
			for j, n := range others {
				v := s.Medians[w][n][m.Key]
				adv := ratio(cr[m.Key], v)
				if m.HigherBetter {
					adv = ratio(v, cr[m.Key])
				}
				if math.IsNaN(adv) || math.IsInf(adv, 0) {
					continue
				}
				x1, x2 := x0+x(1), x0+x(adv)
				if x2 < x1 {
					x1, x2 = x2, x1
				}
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %.2f× (%s)</title></rect>`+"\n",
					x1, y+j*barH, math.Max(x2-x1, 1), barH-1, colors[n], n, esc(m.Label), adv, fmt.Sprintf(m.format, v))
			}
			for _, t := range s.Targets {
				if t.Workload != w || t.Metric != m.Key || t.Against != "controller-runtime" {
					continue
				}
				goal := 1 / t.Value
				if !t.AtMost {
					goal = t.Value
				}
				xx := x0 + x(goal)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e53e3e" stroke-width="2"/>`+"\n", xx, y-2, xx, y+barH*len(others)+1)
			}
		}
	}
	ly := top + panelH + 34
	for j, n := range others {
		lx := left + j*120
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-9, colors[n], lx+16, ly, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">controller-runtime = 1×</text>`+"\n", left+len(others)*120, ly)
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// syncPeakRatio is the peak heap during the first sync over the heap
// after sync (after a GC): what a cold start costs above what is kept.
func syncPeakRatio(r *Result) float64 {
	if r.HeapBytes == 0 {
		return 0
	}
	return r.SyncPeakHeapBytes / r.HeapBytes
}
