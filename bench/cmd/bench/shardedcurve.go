package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/framework/envtest"
)

// The sharded workload's memory curve: converge without a ring and the
// members of each ring at several object counts, on both planes.

const (
	// shardedTargetObjects and shardedTargetMembers are where the sharded
	// memory targets are checked: the members of a ring of 3 at 10,000
	// ConfigMaps.
	shardedTargetObjects = 10000
	shardedTargetMembers = 3
	// shardedHeapTarget and shardedRSSTarget bound the largest member's
	// heap and RSS, as multiples of converge's without a ring.
	shardedHeapTarget = 0.4
	shardedRSSTarget  = 0.5
)

// controlPlane starts a control plane of the bench's: kube-apiserver with
// the driver's request limits raised, CBOR served when cbor is set, and
// the ShardedListAndWatch gate when serverShards is; crds are installed.
func controlPlane(ctx context.Context, cbor, serverShards bool, crds []runtime.Object, extra ...string) (*envtest.Environment, *rest.Config, error) {
	apiFlags := append([]string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}, extra...)
	var gates []string
	if cbor {
		gates = append(gates, "CBORServingAndStorage=true")
	}
	if serverShards {
		gates = append(gates, "ShardedListAndWatch=true")
	}
	if len(gates) > 0 {
		apiFlags = append(apiFlags, "--feature-gates="+strings.Join(gates, ","))
	}
	env := envtest.New(envtest.Options{
		APIServerFlags: apiFlags,
		CRDs:           envtest.CRDOptions{Objects: crds},
		StartTimeout:   2 * time.Minute,
	})
	cfg, err := env.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	return env, cfg, nil
}

// shardedCurve is how the sharded workload runs: on which planes, at
// which object counts.
type shardedCurve struct {
	planes []bool // ServerFilter of each plane, in run order
	sizes  []int  // ascending
	cbor   bool
	// attached is the cluster the driver was given (--kubeconfig), or
	// nil: then each plane gets a control plane of its own, started for
	// it and stopped after its sizes.
	attached *cluster
	quietFor time.Duration
}

// run runs the sharded workload at every size of every plane, repeats
// times each (see runShardedWorkload), creating the ConfigMaps of each
// size as it comes (sizes ascend, so the objects of a smaller one are the
// first of the next); on an attached cluster, once, at o.n, on its one
// plane. done is called after each size with the runs so far. It returns
// what was measured before an error too.
func (sc shardedCurve) run(ctx context.Context, bin string, o runOpts, repeats int, ringSizes []int, logf func(string, ...any), done func([]*ShardedRun, string)) ([]*ShardedRun, error) {
	var runs []*ShardedRun
	for _, server := range sc.planes {
		plane := planeName(server)
		c, sizes := sc.attached, sc.sizes
		o := o
		o.serverFilter = server
		if c == nil {
			logf("%s: starting a control plane for the %s plane", sharded, plane)
			env, cfg, err := controlPlane(ctx, sc.cbor, server, nil)
			if err != nil {
				return runs, fmt.Errorf("%s: %s plane: %w", sharded, plane, err)
			}
			defer env.Stop()
			if c, err = newCluster(cfg); err != nil {
				return runs, err
			}
			c.quietFor = sc.quietFor
			o.kubeconfig = env.KubeconfigPath()
		} else {
			sizes = []int{o.n}
		}
		for _, n := range sizes {
			if sc.attached == nil {
				logf("%s: %s plane: creating %d ConfigMaps", sharded, plane, n)
				t0 := time.Now()
				if err := c.setUp(ctx, workload.ConfigMaps, n, 32); err != nil {
					return runs, err
				}
				logf("%s: %s plane: %d ConfigMaps in %.1fs", sharded, plane, n, time.Since(t0).Seconds())
			}
			o.n = n
			rs, err := runShardedWorkload(ctx, c, bin, o, repeats, ringSizes, logf)
			runs = append(runs, rs...)
			if err != nil {
				return runs, err
			}
			done(runs, fmt.Sprintf("written after %s on the %s plane at N=%d", sharded, plane, n))
		}
	}
	return runs, nil
}

// shardedTargets checks, on each plane, the largest member of the ring of
// shardedTargetMembers at shardedTargetObjects against converge without a
// ring: heap and RSS.
func shardedTargets(sums []*shardedSummary) []target {
	var ts []target
	ring := variantName(shardedTargetMembers)
	for _, s := range sums {
		alone, members := s.Medians[variantName(0)], s.Medians[ring]
		if s.Objects != shardedTargetObjects || alone == nil || members == nil {
			continue
		}
		for _, m := range []struct {
			key   string
			value float64
		}{{"heap", shardedHeapTarget}, {"rss", shardedRSSTarget}} {
			t := target{Workload: sharded, Plane: planeName(s.ServerFilter), Metric: m.key, Against: "converge", AtMost: true, Value: m.value,
				Objects: s.Objects, Members: shardedTargetMembers, Ratio: ratio(members["max/"+m.key], alone["all/"+m.key])}
			t.Met = t.Ratio <= t.Value
			ts = append(ts, t)
		}
	}
	return ts
}

// renderShardedCurve renders the memory per member against N on each
// plane: heap and RSS of converge without a ring and of each ring's
// largest member, their ratios, and the RSS of the largest ring split into
// the process's own memory and its binary's pages.
func renderShardedCurve(sums []*shardedSummary, targets []target) string {
	if len(sums) == 0 {
		return ""
	}
	var rings []int
	for _, m := range sums[0].Variants {
		if m > 0 {
			rings = append(rings, m)
		}
	}
	largest := slices.Max(append([]int{0}, rings...))
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s: memory per member against N\n\n", sharded)
	fmt.Fprintf(&b, "converge without a ring and the members of rings of %s (32 buckets by UID) on N ConfigMaps: heap after a GC and RSS, read once the ring settled, in MiB; "+
		"a ring's figure is its largest member's, and ÷ is that over converge's without a ring. "+
		"RSS is split into the process's own (anonymous) memory and the pages of its binary it touched (file-backed), which every process of the same binary pays. "+
		"On the client plane each member filters on its side (kube-apiserver without the ShardedListAndWatch gate), on the server plane kube-apiserver filters. "+
		"Medians of %d run(s) each.\n\n", joinInts(rings), len(sums[0].Runs)/len(sums[0].Variants))
	cells := []string{"plane", "N", "heap: converge"}
	for _, m := range rings {
		cells = append(cells, variantName(m))
	}
	for _, m := range rings {
		cells = append(cells, variantName(m)+" ÷")
	}
	cells = append(cells, "RSS: converge")
	for _, m := range rings {
		cells = append(cells, variantName(m))
	}
	for _, m := range rings {
		cells = append(cells, variantName(m)+" ÷")
	}
	cells = append(cells, "anonymous: converge", variantName(largest), "file-backed: converge", variantName(largest))
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n|---|--:|" + strings.Repeat("--:|", len(cells)-2) + "\n")
	for _, s := range sums {
		alone := s.Medians[variantName(0)]
		row := []string{planeName(s.ServerFilter), count(s.Objects)}
		for _, key := range []string{"heap", "rss"} {
			row = append(row, fmt.Sprintf("%.1f", alone["all/"+key]))
			for _, m := range rings {
				row = append(row, fmt.Sprintf("%.1f", s.Medians[variantName(m)]["max/"+key]))
			}
			for _, m := range rings {
				row = append(row, fmt.Sprintf("%.2f×", ratio(s.Medians[variantName(m)]["max/"+key], alone["all/"+key])))
			}
		}
		for _, key := range []string{"rssAnon", "rssFile"} {
			row = append(row, fmt.Sprintf("%.1f", alone["all/"+key]), fmt.Sprintf("%.1f", s.Medians[variantName(largest)]["max/"+key]))
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	for _, t := range targets {
		if t.Workload == sharded {
			what := map[string]string{"heap": "heap", "rss": "RSS"}[t.Metric]
			fmt.Fprintf(&b, "\nTarget, %s plane, N=%s: the largest of %d members' %s %s: %.2f× %s", t.Plane, count(t.Objects), t.Members, what, t.describe(), t.Ratio, mark(t.Met))
		}
	}
	if len(targets) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, " and ")
}
