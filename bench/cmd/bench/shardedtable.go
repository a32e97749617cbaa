package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// runShardedWorkload runs, repeats times, converge without a ring and in
// a ring of each of sizes, the order reversed on odd repeats.
func runShardedWorkload(ctx context.Context, c *cluster, bin string, o runOpts, repeats int, sizes []int, logf func(string, ...any)) ([]*ShardedRun, error) {
	var runs []*ShardedRun
	for r := range repeats {
		order := append([]int{0}, sizes...)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, m := range order {
			logf("%s: run %d: %s", sharded, r+1, variantName(m))
			run, err := runSharded(ctx, c, bin, o, r, m)
			if err != nil {
				return nil, err
			}
			var per []string
			for _, p := range run.PerMember {
				per = append(per, fmt.Sprintf("%s: %d buckets, cpu %.2fs, heap %.1f MiB, rss %.1f MiB (anon %.1f, file %.1f)",
					p.Identity, p.Buckets, p.CPUSeconds, p.HeapBytes/mib, p.RSSBytes/mib, p.RSSAnonBytes/mib, p.RSSFileBytes/mib))
			}
			logf("%s: %s plane, N=%d: run %d: %s: sync %.2fs, settled %.2fs, ConfigMap lists %.0f (%.1f MiB), missed %d; %s",
				sharded, planeName(o.serverFilter), o.n, r+1, variantName(m), run.SyncSeconds, run.SettleSeconds, run.ConfigMapLists, run.ConfigMapBytes/mib, run.Missed, strings.Join(per, "; "))
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// variantName names the column of a ring of members (0: no ring).
func variantName(members int) string {
	if members == 0 {
		return "converge"
	}
	return fmt.Sprintf("ring of %d", members)
}

// planeName names the plane of a sharded run: "server" when kube-apiserver
// filters each bucket's list and watch (the ShardedListAndWatch feature
// gate), "client" when each member filters on its side.
func planeName(serverFilter bool) string {
	if serverFilter {
		return "server"
	}
	return "client"
}

// parsePlanes parses --sharded-planes: "client" and "server", comma
// separated, each at most once; it returns whether each filters on the
// server, in the order given.
func parsePlanes(s string) ([]bool, error) {
	var planes []bool
	for _, f := range strings.Split(s, ",") {
		var server bool
		switch strings.TrimSpace(f) {
		case "client":
		case "server":
			server = true
		default:
			return nil, fmt.Errorf("--sharded-planes: %q is neither client (members filter) nor server (kube-apiserver filters, ShardedListAndWatch)", f)
		}
		if slices.Contains(planes, server) {
			return nil, fmt.Errorf("--sharded-planes: %s is given twice", planeName(server))
		}
		planes = append(planes, server)
	}
	return planes, nil
}

// shardedSummary is the medians of the sharded workload's runs at one
// size on one plane, per variant (converge without a ring, then each ring
// size) and figure (see figures).
type shardedSummary struct {
	Objects      int                           `json:"objects"`
	ServerFilter bool                          `json:"serverFilter"`
	Variants     []int                         `json:"variants"` // members; 0: no ring
	Medians      map[string]map[string]float64 `json:"medians"`  // variant -> figure -> median
	Runs         []*ShardedRun                 `json:"runs"`
}

// figures flattens a run: the run's own figures by key, each member's as
// "member-<i>/<key>", their sum as "all/<key>" and the largest as
// "max/<key>".
func (r *ShardedRun) figures() map[string]float64 {
	f := map[string]float64{
		"sync": r.SyncSeconds, "settle": r.SettleSeconds, "lists": r.ConfigMapLists, "sentMiB": r.ConfigMapBytes / mib,
		"missed": float64(r.Missed),
	}
	for i, m := range r.PerMember {
		for k, v := range map[string]float64{
			"buckets": float64(m.Buckets), "syncCpu": m.SyncCPUSeconds, "cpu": m.CPUSeconds,
			"heap": m.HeapBytes / mib, "rss": m.RSSBytes / mib,
			"rssAnon": m.RSSAnonBytes / mib, "rssFile": m.RSSFileBytes / mib,
			"allocMiB": m.Runtime["/gc/heap/allocs:bytes"] / mib, "goroutines": m.Runtime["/sched/goroutines:goroutines"],
		} {
			f[fmt.Sprintf("member-%d/%s", i, k)] = v
			f["all/"+k] += v
			f["max/"+k] = max(f["max/"+k], v)
		}
	}
	return f
}

// summarizeShardedCurve summarizes the runs of each plane and size, in
// the order they were run.
func summarizeShardedCurve(runs []*ShardedRun, sizes []int) []*shardedSummary {
	type group struct {
		server  bool
		objects int
	}
	var order []group
	byGroup := map[group][]*ShardedRun{}
	for _, r := range runs {
		g := group{r.ServerFilter, r.Objects}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	var out []*shardedSummary
	for _, g := range order {
		out = append(out, summarizeSharded(byGroup[g], sizes))
	}
	return out
}

// summarizeSharded summarizes runs, all of one plane and size.
func summarizeSharded(runs []*ShardedRun, sizes []int) *shardedSummary {
	if len(runs) == 0 {
		return nil
	}
	s := &shardedSummary{Objects: runs[0].Objects, ServerFilter: runs[0].ServerFilter, Variants: append([]int{0}, sizes...),
		Medians: map[string]map[string]float64{}, Runs: runs}
	for _, m := range s.Variants {
		byKey := map[string][]float64{}
		for _, r := range runs {
			if r.Members == m {
				for k, v := range r.figures() {
					byKey[k] = append(byKey[k], v)
				}
			}
		}
		med := map[string]float64{}
		for k, vs := range byKey {
			med[k] = median(vs)
		}
		s.Medians[variantName(m)] = med
	}
	return s
}

// shardedRow is one row of the sharded table: a figure of the whole run,
// or of each member.
type shardedRow struct {
	label, key, format string
	perMember          bool
}

var shardedRows = []shardedRow{
	{"time to all reconciled, by any member (s)", "sync", "%.2f", false},
	{"time to ring settled (s)", "settle", "%.2f", false},
	{"lists of ConfigMaps served to settle (LIST and streaming)", "lists", "%.0f", false},
	{"ConfigMaps served to settle (MiB of LIST responses and watch events)", "sentMiB", "%.1f", false},
	{"buckets served", "buckets", "%.0f", true},
	{"CPU to sync (s)", "syncCpu", "%.2f", true},
	{"CPU, whole run (s)", "cpu", "%.2f", true},
	{"heap after settle (MiB)", "heap", "%.1f", true},
	{"RSS after settle (MiB)", "rss", "%.1f", true},
	{"of which anonymous (MiB)", "rssAnon", "%.1f", true},
	{"of which file-backed: the binary's pages (MiB)", "rssFile", "%.1f", true},
	{"heap allocated to settle (MiB)", "allocMiB", "%.0f", true},
	{"goroutines after settle", "goroutines", "%.0f", true},
	{"objects missed", "missed", "%.0f", false},
}

// shardedColumn is one column: the figures of one variant under a key
// prefix; runKeys says whether the run's own figures show in it; ratio
// shows them divided by converge's without a ring (its sums).
type shardedColumn struct {
	label, variant, prefix string
	runKeys, ratio         bool
}

func (s *shardedSummary) columns() []shardedColumn {
	var cols []shardedColumn
	for _, m := range s.Variants {
		v := variantName(m)
		switch {
		case m <= 1:
			cols = append(cols, shardedColumn{label: v, variant: v, prefix: "all/", runKeys: true})
			if m == 1 {
				cols = append(cols, shardedColumn{label: v + " ÷ converge", variant: v, prefix: "all/", runKeys: true, ratio: true})
			}
		default:
			for i := range m {
				cols = append(cols, shardedColumn{label: fmt.Sprintf("%s: member-%d", v, i), variant: v, prefix: fmt.Sprintf("member-%d/", i)})
			}
			cols = append(cols,
				shardedColumn{label: v + ": sum", variant: v, prefix: "all/", runKeys: true},
				shardedColumn{label: v + " ÷ converge", variant: v, prefix: "max/", runKeys: true, ratio: true})
		}
	}
	return cols
}

// renderSharded renders the sharded workload's table.
func renderSharded(s *shardedSummary) string {
	var b strings.Builder
	filter := "each member filters every list and watch on its side (kube-apiserver without the ShardedListAndWatch gate): its bucket informers share one watch of all the ConfigMaps, and each bucket it takes costs a list of them all (lists made at once are one request)"
	if s.ServerFilter {
		filter = "kube-apiserver filters each bucket's list and watch (ShardedListAndWatch feature gate on)"
	}
	fmt.Fprintf(&b, "\n### %s (N=%s ConfigMaps, %s plane)\n\n", sharded, count(s.Objects), planeName(s.ServerFilter))
	fmt.Fprintf(&b, "converge on the configmaps workload without a ring, and as the members of one ring (32 buckets by UID), started together; %s. "+
		"Times are from the start of the first process; the ring has settled when every member sees all the others and every bucket is served, none still listing or handing over. "+
		"Memory is read after that. In the ÷ converge columns a ring's figures per member are its largest member's. Medians of %d run(s) each.\n\n| metric |", filter, len(s.Runs)/len(s.Variants))
	cols := s.columns()
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c.label)
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|", len(cols)) + "\n")
	base := s.Medians[variantName(0)]
	for _, r := range shardedRows {
		fmt.Fprintf(&b, "| %s |", r.label)
		for _, c := range cols {
			key := r.key
			if r.perMember {
				key = c.prefix + r.key
			} else if !c.runKeys {
				b.WriteString(" |")
				continue
			}
			v, ok := s.Medians[c.variant][key]
			switch {
			case !ok || (c.variant == variantName(0) && (r.key == "settle" || r.key == "buckets")):
				b.WriteString(" |")
			case c.ratio:
				baseKey := r.key
				if r.perMember {
					baseKey = "all/" + r.key
				}
				if r.key == "missed" || r.key == "buckets" {
					b.WriteString(" |")
					continue
				}
				fmt.Fprintf(&b, " %.2f× |", ratio(v, base[baseKey]))
			default:
				fmt.Fprintf(&b, " "+r.format+" |", v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
