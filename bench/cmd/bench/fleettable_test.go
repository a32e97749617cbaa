package main

import (
	"strings"
	"testing"
)

func TestFleetTargets(t *testing.T) {
	mem := func(back float64) FleetMemory {
		return FleetMemory{Via: "namespaces", Points: []FleetMemPoint{
			{Clusters: 0, HeapBytes: 10 * mib}, {Clusters: 5, HeapBytes: 12 * mib}, {Clusters: 0, Disengaged: true, HeapBytes: back * mib},
		}}
	}
	iso := func(alone, hole float64, missed int) []FleetIsolation {
		return []FleetIsolation{{WorstQuietP99Ms: alone}, {Blackholed: true, WorstQuietP99Ms: hole, Missed: missed}}
	}
	for _, tc := range []struct {
		name           string
		run            *FleetRun
		heapMet, isoOK bool
	}{
		{"both met", &FleetRun{Memory: []FleetMemory{mem(10.5)}, Isolation: iso(0.4, 1.3, 0)}, true, true},
		{"heap not back", &FleetRun{Memory: []FleetMemory{mem(11.5)}, Isolation: iso(0.4, 1.3, 0)}, false, true},
		{"blackhole adds 1.1 ms", &FleetRun{Memory: []FleetMemory{mem(10)}, Isolation: iso(0.4, 1.5, 0)}, true, false},
		{"a quiet key missed", &FleetRun{Memory: []FleetMemory{mem(10)}, Isolation: iso(0.4, 0.4, 1)}, true, false},
	} {
		ts := fleetTargets(tc.run)
		if len(ts) != 2 {
			t.Fatalf("%s: %d targets, want 2: %+v", tc.name, len(ts), ts)
		}
		if ts[0].Metric != "heapBack/namespaces" || ts[0].Met != tc.heapMet {
			t.Errorf("%s: heap target %+v, want met %v", tc.name, ts[0], tc.heapMet)
		}
		if ts[1].Metric != "blackholeAddsP99Ms" || ts[1].Met != tc.isoOK {
			t.Errorf("%s: isolation target %+v, want met %v", tc.name, ts[1], tc.isoOK)
		}
	}
	cycles := FleetMemory{Via: "secrets", Points: []FleetMemPoint{
		{Clusters: 0, HeapBytes: 10 * mib}, {Clusters: 5, HeapBytes: 12 * mib},
		{Clusters: 0, Cycle: 1, Disengaged: true, HeapBytes: 12 * mib},
		{Clusters: 5, Cycle: 2, HeapBytes: 13 * mib},
		{Clusters: 0, Cycle: 2, Disengaged: true, HeapBytes: 13 * mib},
	}}
	ts := fleetTargets(&FleetRun{Memory: []FleetMemory{cycles}})
	if len(ts) != 2 || ts[0].Met || ts[1].Metric != "heapCycle2/secrets" || !ts[1].Met {
		t.Errorf("two cycles: got %+v, want heapBack missed (1.2×) and heapCycle2 met (1.08×)", ts)
	}
	if ts := fleetTargets(&FleetRun{Memory: []FleetMemory{{Via: "secrets", Points: []FleetMemPoint{{Clusters: 0}}}}}); len(ts) != 0 {
		t.Errorf("a run cut short has no target to check, got %+v", ts)
	}
}

func TestRenderFleet(t *testing.T) {
	run := &FleetRun{Objects: 10, Flood: 10000, Quiet: 2, Polled: 20,
		Memory: []FleetMemory{{Via: "secrets", Points: []FleetMemPoint{
			{Clusters: 0, HeapBytes: 10 * mib, RSSBytes: 40 * mib},
			{Clusters: 4, HeapBytes: 11 * mib, RSSBytes: 42 * mib},
			{Clusters: 0, Cycle: 1, Disengaged: true, AfterSeconds: 3, HeapBytes: 10 * mib, RSSBytes: 41 * mib},
		}}},
		Isolation: []FleetIsolation{
			{QuietWaitP99Ms: map[string]float64{"q1": 0.5, "q0": 0.25}, WorstQuietP99Ms: 0.5},
			{Blackholed: true, QuietWaitP99Ms: map[string]float64{"q1": 0.75, "q0": 0.5}, WorstQuietP99Ms: 0.75, HoleHeldMax: 3, HoleStates: []string{"ready", "unhealthy"}},
		},
	}
	out := renderFleet(run)
	for _, want := range []string{
		"converge only",
		"| secrets | 4 | 11.0 | 42.0 | 0.0 | 0 | 0 | 256 | 512 |",
		"| secrets | 0 (all disengaged, cycle 1, 3 s later: heap 1.00× before) |",
		"| no | 0.250, 0.500 | 0.500 |",
		"| yes | 0.500, 0.750 | 0.750 |",
		"3, ready → unhealthy |",
		"adds +0.250 ms to the worst quiet cluster's p99 queue wait (0.500 → 0.750 ms; target ≤ 1 ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
