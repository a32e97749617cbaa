package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The fleet workload's targets: the heap after disengaging every idle
// cluster at most fleetHeapBack times the heap before engaging them (and,
// after a second cycle of as many clusters, at most fleetHeapBack times
// the heap after the first), and a
// blackholed cluster adding at most fleetIsolationMs to the worst quiet
// cluster's p99 queue wait during the flood.
const (
	fleetHeapBack    = 1.10
	fleetIsolationMs = 1.0
)

// fleetTargets checks the fleet workload's targets.
func fleetTargets(run *FleetRun) []target {
	if run == nil {
		return nil
	}
	var ts []target
	for _, m := range run.Memory {
		before, back, ok := fleetBeforeAndBack(m)
		if !ok {
			continue
		}
		t := target{Workload: fleetName, Metric: "heapBack/" + m.Via, AtMost: true, Value: fleetHeapBack, Ratio: ratio(back.HeapBytes, before.HeapBytes)}
		t.Met = t.Ratio <= t.Value
		ts = append(ts, t)
		// A second cycle leaves no more than the first: what stays is
		// paid once, not per cluster.
		if last := m.Points[len(m.Points)-1]; last.Disengaged && last.Cycle > 1 {
			t := target{Workload: fleetName, Metric: "heapCycle2/" + m.Via, AtMost: true, Value: fleetHeapBack, Ratio: ratio(last.HeapBytes, back.HeapBytes)}
			t.Met = t.Ratio <= t.Value
			ts = append(ts, t)
		}
	}
	if alone, hole, ok := fleetPair(run); ok {
		t := target{Workload: fleetName, Metric: "blackholeAddsP99Ms", AtMost: true, Value: fleetIsolationMs, Ratio: hole.WorstQuietP99Ms - alone.WorstQuietP99Ms}
		t.Met = t.Ratio <= t.Value && alone.Missed == 0 && hole.Missed == 0
		ts = append(ts, t)
	}
	return ts
}

// fleetBeforeAndBack returns the point without idle clusters and the one
// after disengaging them the first time.
func fleetBeforeAndBack(m FleetMemory) (before, back FleetMemPoint, ok bool) {
	i := slices.IndexFunc(m.Points, func(p FleetMemPoint) bool { return p.Clusters == 0 && !p.Disengaged })
	j := slices.IndexFunc(m.Points, func(p FleetMemPoint) bool { return p.Disengaged })
	if i < 0 || j < 0 {
		return before, back, false
	}
	return m.Points[i], m.Points[j], true
}

// fleetPair returns the flood without and with the blackholed cluster.
func fleetPair(run *FleetRun) (alone, hole FleetIsolation, ok bool) {
	i := slices.IndexFunc(run.Isolation, func(x FleetIsolation) bool { return !x.Blackholed })
	j := slices.IndexFunc(run.Isolation, func(x FleetIsolation) bool { return x.Blackholed })
	if i < 0 || j < 0 {
		return alone, hole, false
	}
	return run.Isolation[i], run.Isolation[j], true
}

// renderFleet renders the fleet workload: memory per idle cluster, each
// way of engaging them, and the flood without and with a blackholed
// cluster.
func renderFleet(run *FleetRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### fleet (converge only: no other contender has a manager of many clusters)\n\n")
	fmt.Fprintf(&b, "One controller of ConfigMaps in every engaged cluster (`cluster.Scope{Remote: true}`), 4 workers, every other option its default.\n")
	fmt.Fprintf(&b, "Idle clusters hold %d ConfigMaps of about 1 KiB each and see no change; `namespaces`: labelled namespaces of the manager's own control plane (cluster/namespaces); `secrets`: kubeconfig Secrets (cluster/secrets) reaching a second control plane, each through a TCP proxy of its own, so each cluster has its own connections. Cycle 1 engages them step by step and disengages them all; cycle 2 engages as many new ones and disengages them too. Heap: after two GCs (a sync.Pool's contents outlive one); cycle 2 is also compared with the heap after cycle 1, whose first engagement paid the one-time costs (the warm baseline).\n\n", run.Objects)
	b.WriteString("| via | idle clusters | heap (MiB) | RSS (MiB) | RSS anon (MiB) | goroutines | caches' estimate (KiB) | heap per added cluster (KiB) | RSS per added cluster (KiB) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range run.Memory {
		base := m.Points[0]
		for _, pt := range m.Points {
			label, per, perRSS := fmt.Sprint(pt.Clusters), "", ""
			if pt.Cycle > 1 {
				label += fmt.Sprintf(" (cycle %d)", pt.Cycle)
			}
			if pt.Disengaged {
				label = fmt.Sprintf("0 (all disengaged, cycle %d, %.0f s later: heap %.2f× before", pt.Cycle, pt.AfterSeconds, ratio(pt.HeapBytes, base.HeapBytes))
				if _, back, ok := fleetBeforeAndBack(m); ok && pt.Cycle > 1 {
					label += fmt.Sprintf(", %.2f× after cycle 1", ratio(pt.HeapBytes, back.HeapBytes))
				}
				label += ")"
			} else if pt.Clusters > 0 {
				per = fmt.Sprintf("%.0f", (pt.HeapBytes-base.HeapBytes)/float64(pt.Clusters)/1024)
				perRSS = fmt.Sprintf("%.0f", (pt.RSSBytes-base.RSSBytes)/float64(pt.Clusters)/1024)
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.1f | %d | %.0f | %s | %s |\n", m.Via, label,
				pt.HeapBytes/(1<<20), pt.RSSBytes/(1<<20), pt.RSSAnon/(1<<20), pt.Goroutines, pt.CacheBytes/1024, per, perRSS)
		}
	}
	if len(run.Isolation) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\nFlood: %s patches written by 64 writers into one cluster (a namespace of the manager's plane) while ConfigMaps are created at a fixed rate, round-robin, in %d quiet clusters that were empty. ", count(run.Flood), run.Quiet)
	fmt.Fprintf(&b, "Blackholed: a kubeconfig Secret's cluster on the second plane, %d ConfigMaps its controller reads from the API server and polls every second, whose proxy then holds every byte, 3 s before the flood. ", run.Polled)
	b.WriteString("Queue wait: from a key's add to the Get that hands it to a worker, each quiet cluster's p99 (its flow's `workqueue.FlowStats.WaitP99`, within 25%).\n\n")
	b.WriteString("| blackholed cluster | quiet clusters' p99 queue wait (ms) | worst (ms) | flooded cluster's p99 (ms) | quiet keys | flood to all reconciled (s) | missed | blackholed keys held at once (max), its states |\n|---|---|--:|--:|--:|--:|--:|---|\n")
	for _, x := range run.Isolation {
		var waits []string
		for _, ns := range slices.Sorted(maps.Keys(x.QuietWaitP99Ms)) {
			waits = append(waits, fmt.Sprintf("%.3f", x.QuietWaitP99Ms[ns]))
		}
		hole := "none"
		if x.Blackholed {
			hole = fmt.Sprintf("%d, %s", x.HoleHeldMax, strings.Join(x.HoleStates, " → "))
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %d | %.1f | %d | %s |\n", map[bool]string{false: "no", true: "yes"}[x.Blackholed],
			strings.Join(waits, ", "), x.WorstQuietP99Ms, x.FloodWaitP99Ms, x.QuietKeys, x.FloodSeconds, x.Missed, hole)
	}
	if alone, hole, ok := fleetPair(run); ok {
		fmt.Fprintf(&b, "\nThe blackholed cluster adds %+.3f ms to the worst quiet cluster's p99 queue wait (%.3f → %.3f ms; target ≤ %g ms).\n",
			hole.WorstQuietP99Ms-alone.WorstQuietP99Ms, alone.WorstQuietP99Ms, hole.WorstQuietP99Ms, fleetIsolationMs)
	}
	return b.String()
}
