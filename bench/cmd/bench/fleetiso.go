package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/internal/faultproxy"
)

// FleetIsolation is one run of the flood: o.flood patches written as fast
// as 64 writers can into one cluster while ConfigMaps are created at a
// fixed rate in the quiet clusters, with or without a blackholed cluster
// engaged.
type FleetIsolation struct {
	Blackholed bool `json:"blackholed"`
	// QuietWaitP99Ms is each quiet cluster's p99 queue wait, from add to
	// the Get that handed the key to a worker (its flow's
	// workqueue.FlowStats.WaitP99: every key of the cluster was added
	// during the flood), and WorstQuietP99Ms the largest of them.
	QuietWaitP99Ms  map[string]float64 `json:"quietWaitP99Ms"`
	WorstQuietP99Ms float64            `json:"worstQuietP99Ms"`
	FloodWaitP99Ms  float64            `json:"floodWaitP99Ms"`
	FloodSeconds    float64            `json:"floodSeconds"` // first patch to last reconcile of the flood
	QuietKeys       int                `json:"quietKeys"`    // created during the flood
	Missed          int                `json:"missed"`       // flood and quiet keys not reconciled by the deadline
	// HoleHeldMax is the most keys of the blackholed cluster workers held
	// at once during the flood, HoleStates the states it was seen in.
	HoleHeldMax int      `json:"holeHeldMax,omitempty"`
	HoleStates  []string `json:"holeStates,omitempty"`
}

// fleetIsolation runs the flood once: a new contender engages o.quiet
// empty quiet clusters and the flooded one (namespaces of the manager's
// plane) and, when blackholed, the far plane's polled ConfigMaps through a
// proxy, which then holds every byte; then the flood and the quiet creates
// run together.
func fleetIsolation(ctx context.Context, p *fleetPlanes, bin string, o fleetOpts, blackholed bool, logf func(string, ...any)) (*FleetIsolation, error) {
	quiet := quietNamespaces(o, blackholed)
	for _, ns := range append(slices.Clone(quiet), fleetFloodNamespace) {
		if err := p.home.namespace(ctx, ns, fleetOn); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, ns := range append(slices.Clone(quiet), fleetFloodNamespace) {
			_ = p.home.labelNamespace(context.WithoutCancel(ctx), ns, map[string]string{workload.FleetLabel: ""})
		}
	}()
	clusters := o.quiet + 1
	var proxy *faultproxy.Proxy
	if blackholed {
		var err error
		if proxy, err = p.farSecret(ctx, fleetHoleCluster); err != nil {
			return nil, err
		}
		defer proxy.Close()
		defer func() { _ = p.deleteSecret(context.WithoutCancel(ctx), fleetHoleCluster) }()
		clusters++
	}
	proc, err := startFleet(bin, p.kubeconfig, fmt.Sprintf("fleet-flood-blackholed-%v", blackholed), o)
	if err != nil {
		return nil, err
	}
	defer proc.kill()
	if _, err := waitFleet(ctx, proc, "synced", o.deadline+time.Minute, func(st fleetStatus) bool {
		return st.int("ready") == clusters && st.int("reconciles."+fleetFloodNamespace) >= o.flood &&
			(!blackholed || st.int("reconciles."+fleetHoleCluster) >= o.polled)
	}); err != nil {
		return nil, err
	}
	if blackholed {
		proxy.SetMode(faultproxy.Blackhole, 0)
		// Every polled key comes back within fleetPoll, and hangs.
		if err := sleepCtx(ctx, 3*fleetPoll); err != nil {
			return nil, err
		}
	}
	iso, err := flood(ctx, p, proc, o, quiet, map[bool]int64{false: 1, true: 2}[blackholed])
	if err != nil {
		return nil, err
	}
	iso.Blackholed = blackholed
	logf("%s: flood of %d, blackholed cluster %v: quiet p99 wait %v ms (worst %.3f), flood %.1fs, quiet keys %d, missed %d, hole held at most %d (%v)",
		fleetName, o.flood, blackholed, iso.QuietWaitP99Ms, iso.WorstQuietP99Ms, iso.FloodSeconds, iso.QuietKeys, iso.Missed, iso.HoleHeldMax, iso.HoleStates)
	if blackholed {
		proxy.SetMode(faultproxy.Reset, 0) // the hung polls fail, rather than hold the shutdown for its grace period
	}
	proc.terminate()
	proc.wait(time.Minute)
	return iso, nil
}

// flood patches every ConfigMap of the flooded cluster once, to gen (a
// gen it does not hold yet, so that every patch is a change), 64 at a time,
// and meanwhile creates ConfigMaps in the quiet clusters at o.quietRate,
// round-robin, until every key of the flood was reconciled; then it waits
// for the quiet keys' reconciles and reads the quiet clusters' queue
// waits.
func flood(ctx context.Context, p *fleetPlanes, proc *member, o fleetOpts, quiet []string, gen int64) (*FleetIsolation, error) {
	iso := &FleetIsolation{QuietWaitP99Ms: map[string]float64{}}
	stop := make(chan struct{})
	sampled := fleetSampler(proc, stop)
	var created atomic.Int64
	quietDone := make(chan struct{})
	go func() {
		defer close(quietDone)
		// Each create in a goroutine of its own, so that the API
		// server's latency under the flood does not slow the pace.
		var wg sync.WaitGroup
		defer wg.Wait()
		tick := time.NewTicker(time.Duration(float64(time.Second) / o.quietRate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ns := quiet[i%len(quiet)]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("quiet-%05d", i)}}
			wg.Go(func() {
				if _, err := p.home.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err == nil {
					created.Add(1)
				}
			})
		}
	}()
	start := time.Now()
	err := parallel(ctx, o.flood, 64, func(ctx context.Context, i int) error {
		name := workload.Name(workload.ConfigMaps, i)
		_, err := p.home.cs.CoreV1().ConfigMaps(fleetFloodNamespace).Patch(ctx, name, types.MergePatchType, workload.Patch(workload.ConfigMaps, gen), metav1.PatchOptions{})
		return err
	})
	want := func(st fleetStatus) (flood, quietSeen int) {
		for _, ns := range quiet {
			quietSeen += st.int("reconciles." + ns)
		}
		return st.int("reconciles."+fleetFloodNamespace) - o.flood, quietSeen
	}
	if err == nil {
		// The quiet clusters' keys keep coming while the flood's wait in
		// the queue, not only while they are written. A flood not done
		// by the deadline counts as missed below.
		if st, werr := waitFleet(ctx, proc, "done with the flood's keys", o.deadline, func(st fleetStatus) bool {
			f, _ := want(st)
			return f >= o.flood
		}); st == nil {
			err = werr
		}
	}
	close(stop)
	<-quietDone
	if err != nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	iso.FloodSeconds = time.Since(start).Seconds()
	iso.QuietKeys = int(created.Load())
	st, err := waitFleet(ctx, proc, "done with the quiet keys", o.deadline, func(st fleetStatus) bool {
		f, q := want(st)
		return f >= o.flood && q >= iso.QuietKeys
	})
	if st == nil {
		return nil, err
	}
	f, q := want(st)
	iso.Missed = max(0, o.flood-f) + max(0, iso.QuietKeys-q)
	iso.HoleHeldMax, iso.HoleStates = sampled()
	for _, ns := range quiet {
		ms := float64(st.int("wait."+ns)) / 1e6
		iso.QuietWaitP99Ms[ns] = ms
		iso.WorstQuietP99Ms = math.Max(iso.WorstQuietP99Ms, ms)
	}
	iso.FloodWaitP99Ms = float64(st.int("wait."+fleetFloodNamespace)) / 1e6
	return iso, nil
}
