package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestShardedRunFigures(t *testing.T) {
	r := &ShardedRun{Members: 2, SyncSeconds: 3, ConfigMapBytes: 2 * mib, PerMember: []MemberRun{
		{Identity: "member-0", Buckets: 20, HeapBytes: 10 * mib, CPUSeconds: 1},
		{Identity: "member-1", Buckets: 12, HeapBytes: 30 * mib, CPUSeconds: 2},
	}}
	f := r.figures()
	for key, want := range map[string]float64{
		"sync": 3, "sentMiB": 2,
		"member-0/buckets": 20, "member-1/heap": 30,
		"all/buckets": 32, "all/heap": 40, "all/cpu": 3,
		"max/heap": 30, "max/buckets": 20,
	} {
		if f[key] != want {
			t.Errorf("%s: got %v, want %v", key, f[key], want)
		}
	}
}

func TestRenderSharded(t *testing.T) {
	run := func(members int, heap float64) *ShardedRun {
		r := &ShardedRun{Members: members, Objects: 10, SyncSeconds: 1, SettleSeconds: 1}
		for range max(members, 1) {
			r.PerMember = append(r.PerMember, MemberRun{Buckets: 32 / max(members, 1), HeapBytes: heap * mib})
		}
		return r
	}
	s := summarizeSharded([]*ShardedRun{run(0, 4), run(1, 8), run(2, 3)}, []int{1, 2})
	table := renderSharded(s)
	for _, want := range []string{
		"| metric | converge | ring of 1 | ring of 1 ÷ converge | ring of 2: member-0 | ring of 2: member-1 | ring of 2: sum | ring of 2 ÷ converge |",
		// converge has no buckets; members show theirs; ratios are blank.
		"| buckets served | | 32 | | 16 | 16 | 32 | |",
		// the ring of 2 ÷ converge column holds the largest member's heap.
		"| heap after settle (MiB) | 4.0 | 8.0 | 2.00× | 3.0 | 3.0 | 6.0 | 0.75× |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no line %q:\n%s", want, table)
		}
	}
}

func TestParsePlanes(t *testing.T) {
	for in, want := range map[string]string{"client,server": "[false true]", "server": "[true]", " client ": "[false]"} {
		got, err := parsePlanes(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("parsePlanes(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"client,client": "client is given twice", "gated": `"gated" is neither client`, "": `"" is neither client`} {
		if _, err := parsePlanes(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePlanes(%q): error %v, want one saying %q", in, err, want)
		}
	}
}

// curveRuns is one run of converge without a ring, a ring of 1 and a ring
// of 3 at n objects on a plane, the members of the ring of 3 using heap
// and rss MiB (the others 10 and 60 MiB, converge 20 and 70).
func curveRuns(server bool, n int, heap, rss float64) []*ShardedRun {
	run := func(members int, heaps, rsss []float64) *ShardedRun {
		r := &ShardedRun{Members: members, Objects: n, ServerFilter: server}
		for i := range heaps {
			r.PerMember = append(r.PerMember, MemberRun{Identity: fmt.Sprint("member-", i), HeapBytes: heaps[i] * mib, RSSBytes: rsss[i] * mib,
				RSSAnonBytes: (rsss[i] - 30) * mib, RSSFileBytes: 30 * mib})
		}
		return r
	}
	return []*ShardedRun{
		run(0, []float64{20}, []float64{70}),
		run(1, []float64{21}, []float64{72}),
		run(3, []float64{heap - 1, heap, heap - 2}, []float64{rss, rss - 1, rss - 3}),
	}
}

func TestShardedTargetsTakeTheLargestMemberOfTheRingOfThreeAtTenThousand(t *testing.T) {
	var runs []*ShardedRun
	runs = append(runs, curveRuns(false, 1000, 100, 100)...) // not checked at 1,000
	runs = append(runs, curveRuns(false, 10000, 8, 36)...)
	runs = append(runs, curveRuns(true, 10000, 9, 35)...)
	ts := shardedTargets(summarizeShardedCurve(runs, []int{1, 3}))
	if len(ts) != 4 {
		t.Fatalf("%d targets, want heap and RSS on each plane at N=10,000: %+v", len(ts), ts)
	}
	for _, tc := range []struct {
		plane, metric string
		ratio         float64
		met           bool
	}{
		{"client", "heap", 8.0 / 20, true},
		{"client", "rss", 36.0 / 70, false},
		{"server", "heap", 9.0 / 20, false},
		{"server", "rss", 35.0 / 70, true},
	} {
		i := slices.IndexFunc(ts, func(x target) bool { return x.Plane == tc.plane && x.Metric == tc.metric })
		if i < 0 {
			t.Fatalf("no %s target on the %s plane", tc.metric, tc.plane)
		}
		if got := ts[i]; math.Abs(got.Ratio-tc.ratio) > 1e-9 || got.Met != tc.met || got.Objects != 10000 || got.Members != 3 {
			t.Errorf("%s plane %s: %+v, want ratio %.3f met %v at N=10,000 for 3 members", tc.plane, tc.metric, got, tc.ratio, tc.met)
		}
	}
}

func TestRenderShardedCurve(t *testing.T) {
	runs := append(curveRuns(false, 1000, 12, 60), curveRuns(false, 10000, 8, 35)...)
	sums := summarizeShardedCurve(runs, []int{1, 3})
	out := renderShardedCurve(sums, shardedTargets(sums))
	for _, want := range []string{
		"| plane | N | heap: converge | ring of 1 | ring of 3 | ring of 1 ÷ | ring of 3 ÷ | RSS: converge | ring of 1 | ring of 3 | ring of 1 ÷ | ring of 3 ÷ | anonymous: converge | ring of 3 | file-backed: converge | ring of 3 |",
		"| client | 1,000 | 20.0 | 21.0 | 12.0 | 1.05× | 0.60× | 70.0 | 72.0 | 60.0 | 1.03× | 0.86× | 40.0 | 30.0 | 30.0 | 30.0 |",
		"| client | 10,000 | 20.0 | 21.0 | 8.0 | 1.05× | 0.40× | 70.0 | 72.0 | 35.0 | 1.03× | 0.50× | 40.0 | 5.0 | 30.0 | 30.0 |",
		"Target, client plane, N=10,000: the largest of 3 members' heap ≤ 0.4× converge: 0.40× ✓",
		"Target, client plane, N=10,000: the largest of 3 members' RSS ≤ 0.5× converge: 0.50× ✓",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the curve has no line %q:\n%s", want, out)
		}
	}
}
