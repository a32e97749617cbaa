package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/internal/faultproxy"
)

// fleetEngager engages and disengages idle clusters one way.
type fleetEngager struct {
	via string
	// engage makes cluster i (0-based) and engages it; disengage
	// disengages every cluster engage made.
	engage    func(ctx context.Context, i int) error
	disengage func(ctx context.Context) error
	close     func()
	// idle, when not zero, is how long after the last disengagement the
	// memory is read once more (fleetOpts.connIdle).
	idle time.Duration
}

// runFleetWorkload runs the fleet workload on two control planes of its
// own: the memory of idle clusters engaged each way, then the flood
// without and with a blackholed cluster.
func runFleetWorkload(ctx context.Context, bin string, o fleetOpts, logf func(string, ...any)) (*FleetRun, error) {
	logf("%s: starting two control planes", fleetName)
	p, err := startFleetPlanes(ctx, o.cbor)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	run := &FleetRun{Objects: o.objects, Flood: o.flood, Quiet: o.quiet, Polled: o.polled}
	for _, e := range []fleetEngager{namespacesEngager(p, o), secretsEngager(ctx, p, o)} {
		mem, err := fleetMemory(ctx, p, bin, o, e, logf)
		e.close()
		if err != nil {
			return run, err
		}
		run.Memory = append(run.Memory, *mem)
	}
	if err := p.home.configMaps(ctx, fleetFloodNamespace, o.flood, nil); err != nil {
		return run, err
	}
	if err := p.far.configMaps(ctx, fleetHoleNamespace, o.polled, map[string]string{workload.PollAnnotation: fleetPoll.String()}); err != nil {
		return run, err
	}
	for _, blackholed := range []bool{false, true} {
		iso, err := fleetIsolation(ctx, p, bin, o, blackholed, logf)
		if err != nil {
			return run, err
		}
		run.Isolation = append(run.Isolation, *iso)
	}
	return run, nil
}

const (
	fleetIdleNamespace  = "bench-fleet-idle" // of the far plane: the Secrets' idle clusters' ConfigMaps
	fleetFloodNamespace = "bench-fleet-flood"
	fleetHoleNamespace  = "bench-fleet-hole" // of the far plane
	fleetHoleCluster    = "hole"
	// fleetPoll is how often the blackholed cluster's controller reads
	// each of its ConfigMaps from its API server.
	fleetPoll = time.Second
)

var fleetOn = map[string]string{workload.FleetLabel: "true"}

// namespacesEngager engages namespaces of the manager's plane, each with
// o.objects ConfigMaps.
func namespacesEngager(p *fleetPlanes, o fleetOpts) fleetEngager {
	var made []string
	return fleetEngager{
		via: "namespaces",
		engage: func(ctx context.Context, i int) error {
			ns := fmt.Sprintf("bench-fleet-idle-%03d", i)
			if err := p.home.configMaps(ctx, ns, o.objects, nil); err != nil {
				return err
			}
			made = append(made, ns)
			return p.home.labelNamespace(ctx, ns, fleetOn)
		},
		disengage: func(ctx context.Context) error {
			for _, ns := range made {
				if err := p.home.labelNamespace(ctx, ns, map[string]string{workload.FleetLabel: ""}); err != nil {
					return err
				}
			}
			return nil
		},
		close: func() {},
	}
}

// secretsEngager engages kubeconfig Secrets of the far plane, each through
// a proxy of its own, so each has its own connections, as clusters of
// their own would; the far plane holds o.objects ConfigMaps, which each
// caches.
func secretsEngager(ctx context.Context, p *fleetPlanes, o fleetOpts) fleetEngager {
	var proxies []*faultproxy.Proxy
	var names []string
	e := fleetEngager{via: "secrets", idle: o.connIdle}
	e.engage = func(ctx context.Context, i int) error {
		if i == 0 {
			if err := p.far.configMaps(ctx, fleetIdleNamespace, o.objects, nil); err != nil {
				return err
			}
		}
		name := fmt.Sprintf("idle-%03d", i)
		proxy, err := p.farSecret(ctx, name)
		if err != nil {
			return err
		}
		proxies, names = append(proxies, proxy), append(names, name)
		return nil
	}
	e.disengage = func(ctx context.Context) error {
		for _, n := range names {
			if err := p.deleteSecret(ctx, n); err != nil {
				return err
			}
		}
		return nil
	}
	e.close = func() {
		for _, pr := range proxies {
			pr.Close()
		}
		_ = p.far.cs.CoreV1().ConfigMaps(fleetIdleNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	return e
}

// fleetMemory starts the fleet contender with no cluster but its own,
// reads its memory, engages idle clusters up to each of o.steps (reading
// its memory once all are ready and their objects reconciled), then
// disengages them all and reads it again; then engages as many new ones
// and disengages them again, and reads it a last time: what the first
// cycle left that the second did not add to was paid once, not per
// cluster.
func fleetMemory(ctx context.Context, p *fleetPlanes, bin string, o fleetOpts, e fleetEngager, logf func(string, ...any)) (*FleetMemory, error) {
	proc, err := startFleet(bin, p.kubeconfig, "fleet-memory-"+e.via, o)
	if err != nil {
		return nil, err
	}
	defer proc.kill()
	mem := &FleetMemory{Via: e.via}
	// Started: the debug page is served once the manager runs.
	if _, err := waitFleet(ctx, proc, "started", o.deadline, func(st fleetStatus) bool {
		return st["goroutines"] != "" && st["flowError"] == "" && st["ready"] == "0"
	}); err != nil {
		return nil, err
	}
	engaged, last := 0, o.steps[len(o.steps)-1]
	for cycle := 1; cycle <= 2; cycle++ {
		steps := append([]int{0}, o.steps...)
		if cycle == 2 {
			steps = []int{last}
		}
		for _, k := range steps {
			for ; engaged < k+(cycle-1)*last; engaged++ {
				if err := e.engage(ctx, engaged); err != nil {
					return nil, err
				}
			}
			pt, err := fleetEngaged(ctx, proc, o, k, engaged)
			if err != nil {
				return nil, err
			}
			pt.Cycle = cycle
			mem.Points = append(mem.Points, pt)
			fleetProfile(proc, o, e.via, pt)
			logf("%s: %s: %d idle clusters (cycle %d): heap %.1f MiB, rss %.1f MiB, goroutines %d", fleetName, e.via, k, cycle, pt.HeapBytes/(1<<20), pt.RSSBytes/(1<<20), pt.Goroutines)
		}
		if err := e.disengage(ctx); err != nil {
			return nil, err
		}
		if _, err := waitFleet(ctx, proc, "disengaged", o.deadline, func(st fleetStatus) bool { return st["engaged"] == "0" }); err != nil {
			return nil, err
		}
		// What the disengaged clusters ran winds down: give it the time a
		// reconcile's context takes to end.
		pt, err := fleetMemPoint(ctx, proc, 0, true, 2*time.Second+o.memAfter)
		if err != nil {
			return nil, err
		}
		pt.Cycle, pt.AfterSeconds = cycle, (2*time.Second + o.memAfter).Seconds()
		mem.Points = append(mem.Points, pt)
		fleetProfile(proc, o, e.via, pt)
		logf("%s: %s: all disengaged (cycle %d): heap %.1f MiB, rss %.1f MiB, goroutines %d", fleetName, e.via, cycle, pt.HeapBytes/(1<<20), pt.RSSBytes/(1<<20), pt.Goroutines)
	}
	if e.idle > 0 {
		// What an idle connection's timeout closes.
		pt, err := fleetMemPoint(ctx, proc, 0, true, e.idle)
		if err != nil {
			return nil, err
		}
		pt.Cycle, pt.AfterSeconds = 2, (2*time.Second + o.memAfter + e.idle).Seconds()
		mem.Points = append(mem.Points, pt)
		fleetProfile(proc, o, e.via, pt)
		logf("%s: %s: all disengaged (cycle 2, %.0fs later): heap %.1f MiB, rss %.1f MiB, goroutines %d", fleetName, e.via, pt.AfterSeconds, pt.HeapBytes/(1<<20), pt.RSSBytes/(1<<20), pt.Goroutines)
	}
	proc.terminate()
	proc.wait(time.Minute)
	return mem, nil
}

// fleetProfile writes a heap profile of proc at pt into o.profileDir, if
// set: fleet-<via>-c<cycle>-<clusters>[-disengaged-<s>s].heap.pprof, for
// go tool pprof -sample_index=inuse_space -base.
func fleetProfile(proc *member, o fleetOpts, via string, pt FleetMemPoint) {
	if o.profileDir == "" {
		return
	}
	name := fmt.Sprintf("fleet-%s-c%d-%d", via, pt.Cycle, pt.Clusters)
	if pt.Disengaged {
		name += fmt.Sprintf("-disengaged-%.0fs", pt.AfterSeconds)
	}
	proc.heapProfile(filepath.Join(o.profileDir, name+".heap.pprof"))
}

// fleetEngaged waits until k clusters are ready and every cluster engaged
// so far (made, in all) reconciled its objects, then reads the memory.
func fleetEngaged(ctx context.Context, proc *member, o fleetOpts, k, made int) (FleetMemPoint, error) {
	if _, err := waitFleet(ctx, proc, fmt.Sprintf("%d clusters ready and reconciled", k), o.deadline, func(st fleetStatus) bool {
		return st.int("ready") == k && st.sum("reconciles.")-st.int("reconciles.-") >= made*o.objects
	}); err != nil {
		return FleetMemPoint{}, err
	}
	return fleetMemPoint(ctx, proc, k, false, o.memAfter)
}

// quietNamespaces names the quiet clusters of one isolation run.
func quietNamespaces(o fleetOpts, blackholed bool) []string {
	var out []string
	for i := range o.quiet {
		out = append(out, fmt.Sprintf("bench-fleet-quiet-%d-%v", i, map[bool]string{false: "alone", true: "hole"}[blackholed]))
	}
	return out
}

// fleetSampler polls the contender's status during the flood and keeps the
// most keys of the blackholed cluster its workers held at once.
func fleetSampler(proc *member, stop <-chan struct{}) (wait func() (maxHeld int, states []string)) {
	var wg sync.WaitGroup
	var held int
	var seen []string
	wg.Go(func() {
		for {
			if st, err := proc.status(); err == nil {
				held = max(held, fleetStatus(st).int("held."+fleetHoleCluster))
				if s := st["state."+fleetHoleCluster]; s != "" {
					seen = append(seen, s)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return func() (int, []string) {
		wg.Wait()
		return held, slices.Compact(seen)
	}
}
