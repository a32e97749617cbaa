package main

import (
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
	s := summarizeSharded([]*ShardedRun{run(0, 4), run(1, 8), run(2, 3)}, []int{1, 2}, false)
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
