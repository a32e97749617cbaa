// Command bench runs converge, controller-runtime and a hand-written client-go
// controller side by side against one local control plane, and writes a
// table, a JSON file and a chart of what each needed.
//
// Each contender is a separate process, started in turn for each workload
// (ConfigMaps, Pods, a custom resource), doing the same work per key: read
// the object from its cache and report the resource version and the "gen"
// field it saw; in the parents workload each is an App controller that
// writes. The sharded workload runs converge alone, as the members of a
// sharding ring; the floor is the driver's own list of the ConfigMaps. See
// bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// contenders names the contender programs, in run order for even repeats.
// converge-compact is the converge program with its workload's kind
// cached compact (informers.Options.Compact, the program's --compact).
var contenders = []string{"converge", "converge-compact", "controller-runtime", "client-go"}

// compactContender is the contender that runs the converge program with
// --compact.
const compactContender = "converge-compact"

var contenderPkg = map[string]string{
	"converge":           "./contenders/converge",
	compactContender:     "./contenders/converge",
	"controller-runtime": "./contenders/controllerruntime",
	"client-go":          "./contenders/clientgo",
}

// isConverge reports whether contender runs the converge program.
func isConverge(contender string) bool { return contenderPkg[contender] == contenderPkg["converge"] }

type workloadFlags struct {
	n                 int
	stormRate, rate   float64
	burst, backlogMax int
}

func main() {
	log.SetFlags(0)
	var (
		scale    = flag.Float64("scale", 1, "multiply every object count by this")
		repeats  = flag.Int("repeats", 1, "runs of each contender per workload; the order alternates and medians are reported")
		workers  = &workerCounts{4}
		only     = flag.String("workloads", "configmaps,pods,widgets,parents,sharded,fleet", "workloads to run, comma-separated")
		who      = flag.String("contenders", strings.Join(contenders, ","), "contenders to run, comma-separated")
		duration = flag.Duration("duration", 10*time.Second, "length of the fixed-rate update phase")
		deadline = flag.Duration("deadline", 30*time.Second, "how long an update may stay unseen before it counts as missed")
		out      = flag.String("out", "results", "folder for results.json, results.md and chart.svg")
		profile  = flag.Bool("profile", false, "write CPU and heap profiles of every contender run to <out>/profiles")
		cbor     = flag.Bool("cbor", true, "serve CBOR from kube-apiserver (feature gate CBORServingAndStorage)")
		quiet    = flag.Bool("quiet", false, "print only the table")
		attach   = flag.String("kubeconfig", "", "use this cluster (objects already created, e.g. by --hold) instead of starting a control plane")
		prebuilt = flag.String("prebuilt", "", "folder of already built contender binaries, named after the contenders (converge-compact runs the one named converge)")
		phases   = flag.String("phases", "storm,steady,burst,backlog,rollout,drift", "phases to run after start-up, comma-separated")
		hold     = flag.Bool("hold", false, "create the objects, print the kubeconfig path and wait for Ctrl-C instead of running contenders (for profiling by hand)")
		quick    = flag.Bool("quick", false, "smoke test: every workload at a hundredth of its size, one repeat, short phases, results in a temporary folder (flags given still count)")
		rings    = flag.String("ring-sizes", "1,3", "sharded: members of each ring, comma-separated; converge without a ring runs too")
		planesIn = flag.String("sharded-planes", "client,server", "sharded: the planes to run on, each on a control plane of its own: client (kube-apiserver without the ShardedListAndWatch gate: members filter), server (with it: kube-apiserver filters); with --kubeconfig, the one plane that cluster is")
		shSizes  = flag.String("sharded-sizes", "1000,10000,50000", "sharded: the ConfigMap counts to run at, comma-separated (multiplied by --scale)")
	)
	wf := map[workload.Kind]*workloadFlags{
		workload.ConfigMaps: {n: 10000, stormRate: 200, rate: 100, burst: 2000, backlogMax: 10000},
		workload.Pods:       {n: 5000, stormRate: 60, rate: 40, burst: 1000, backlogMax: 5000},
		workload.Widgets:    {n: 5000, stormRate: 200, rate: 100, burst: 2000, backlogMax: 5000},
		workload.Parents:    {n: 1000},
	}
	var (
		sizesArg    = flag.String("sizes", "", "the scale curve: run configmaps and parents at each of these object counts, comma-separated (e.g. 1000,10000,50000), instead of the usual tables")
		cmSizes     = flag.String("configmaps-sizes", "", "the scale curve: the sizes of configmaps, instead of --sizes")
		parentSizes = flag.String("parents-sizes", "", "the scale curve: the sizes of parents, instead of --sizes")
	)
	flag.Var(workers, "workers", "reconcile workers of every contender; the drain phase runs at each of a comma-separated list (default there 1,2,4)")
	drainEvents := flag.Int("drain-events", 50000, "drain: the ConfigMaps, each patched once per round")
	drainRounds := flag.Int("drain-rounds", 10, "drain: the rounds that count, per worker count")
	idle := flag.Duration("idle", 10*time.Second, "parents: the window without changes in which writes are counted")
	fleetSteps := flag.String("fleet-clusters", "5,20", "fleet: the idle clusters engaged, comma-separated, ascending (0 is measured first)")
	fleetFlood := flag.Int("fleet-flood", 10000, "fleet: the patches of the flood (times --scale)")
	fleetRate := flag.Float64("fleet-quiet-rate", 40, "fleet: ConfigMaps created per second in the quiet clusters during the flood")
	for _, k := range workload.Kinds {
		f := wf[k]
		flag.IntVar(&f.n, string(k), f.n, "number of "+string(k))
		if k == workload.Parents {
			continue
		}
		flag.Float64Var(&f.rate, string(k)+"-rate", f.rate, "fixed update rate for "+string(k)+" (updates/s)")
		flag.Float64Var(&f.stormRate, string(k)+"-storm-rate", f.stormRate, "update rate for "+string(k)+" while the initial keys drain")
	}
	flag.Parse()
	start, loadStart := time.Now(), loadAverage()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	memAfter, quietFor := time.Second, defaultQuietFor
	if *quick {
		// Each default only where the flag was not given.
		for name, v := range map[string]string{"scale": "0.01", "repeats": "1", "duration": "1s", "idle": "500ms", "deadline": "20s", "fleet-clusters": "2"} {
			if !set[name] {
				must(flag.Set(name, v))
			}
		}
		if !set["out"] {
			dir, err := os.MkdirTemp("", "converge-bench-quick-")
			must(err)
			must(flag.Set("out", dir))
		}
		memAfter, quietFor = 200*time.Millisecond, 500*time.Millisecond
	}
	var given []string // --workloads, when given
	if set["workloads"] {
		given = strings.Split(*only, ",")
	}
	plan, err := scalePlan(*sizesArg, map[workload.Kind]string{workload.ConfigMaps: *cmSizes, workload.Parents: *parentSizes}, given)
	if err != nil {
		log.Fatal(err)
	}
	if plan != nil && (*attach != "" || *hold) {
		log.Fatal("--sizes creates and deletes the objects of every size itself: it does not go with --kubeconfig or --hold")
	}
	var ringSizes []int
	for _, f := range strings.Split(*rings, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			log.Fatalf("--ring-sizes: %q is not a member count", f)
		}
		ringSizes = append(ringSizes, n)
	}
	planes, err := parsePlanes(*planesIn)
	if err != nil {
		log.Fatal(err)
	}
	if *attach != "" && len(planes) != 1 {
		log.Fatal("--kubeconfig: give --sharded-planes=client or --sharded-planes=server, the plane of that cluster (whether its kube-apiserver has the ShardedListAndWatch gate)")
	}
	shardedSizes, err := parseSizes(*shSizes)
	if err != nil {
		log.Fatalf("--sharded-%v", strings.TrimPrefix(err.Error(), "--"))
	}
	for i, n := range shardedSizes {
		shardedSizes[i] = max(1, int(float64(n)**scale))
	}
	shardedSizes = slices.Compact(shardedSizes)
	logf := func(format string, args ...any) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	names := strings.Split(*who, ",")
	for _, n := range names {
		if contenderPkg[n] == "" {
			log.Fatalf("unknown contender %q (have %v)", n, contenders)
		}
	}
	// kinds are the workloads of the contenders' table; withSharded, the
	// sharded workload runs too, on the ConfigMaps. lastUse is the index in
	// runs of the last workload that uses a kind's objects.
	var (
		kinds       []workload.Kind
		withSharded bool
		withFleet   bool
		runs        []workload.Kind
		lastUse     = map[workload.Kind]int{}
	)
	for _, k := range strings.Split(*only, ",") {
		switch {
		case k == sharded:
			withSharded = true
			if *attach != "" || *hold { // else on control planes of its own
				lastUse[workload.ConfigMaps] = len(runs)
			}
			runs = append(runs, sharded)
		case k == fleetName:
			if (*attach != "" || *hold) && !set["workloads"] {
				continue // on control planes of its own only: left out of the default list
			}
			if *attach != "" || *hold {
				log.Fatalf("--workloads=%s starts two control planes of its own: it does not go with --kubeconfig or --hold", fleetName)
			}
			withFleet = true
			runs = append(runs, workload.Kind(k))
		case slices.Contains(workload.Kinds, workload.Kind(k)):
			kinds = append(kinds, workload.Kind(k))
			lastUse[workload.Kind(k)] = len(runs)
			runs = append(runs, workload.Kind(k))
		default:
			log.Fatalf("unknown workload %q (have %v, %s and %s)", k, workload.Kinds, sharded, fleetName)
		}
	}
	if plan != nil { // the scale curve: only its workloads
		kinds, withSharded, withFleet, runs = nil, false, false, nil
		for _, sw := range plan {
			kinds = append(kinds, sw.kind)
		}
	}

	tmp, err := os.MkdirTemp("", "converge-bench-")
	if err != nil {
		log.Fatal(err)
	}
	logDir := filepath.Join(tmp, "logs")
	_ = os.MkdirAll(logDir, 0o755)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	profileDir := ""
	if *profile {
		profileDir, _ = filepath.Abs(filepath.Join(*out, "profiles"))
		_ = os.MkdirAll(profileDir, 0o755)
	}

	build := names
	if (withSharded || withFleet) && !slices.Contains(names, "converge") {
		build = append(slices.Clone(names), "converge") // for the sharded and fleet workloads
	}
	var bins map[string]string
	if *prebuilt != "" {
		bins = map[string]string{}
		for _, n := range build {
			bin := n
			if n == compactContender {
				bin = "converge" // the same program
			}
			bins[n] = filepath.Join(*prebuilt, bin)
		}
	} else {
		logf("building contenders")
		if bins, err = buildContenders(ctx, build); err != nil {
			log.Fatal(err)
		}
	}

	var (
		cfg        *rest.Config
		kubeconfig = *attach
		c          *cluster // nil when only the sharded workload runs, on control planes of its own
	)
	switch {
	case kubeconfig != "":
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			log.Fatal(err)
		}
	case len(kinds) > 0 || *hold:
		logf("starting the control plane")
		// The sharded workload's planes have control planes of their
		// own; --hold makes its objects on this one, on the first plane.
		var extra []string
		if slices.Contains(strings.Split(*phases, ","), "drain") {
			// The drain's backlog must stay in the watch cache while it
			// is written, however slowly: see drainHistory.
			extra = append(extra, fmt.Sprintf("--request-timeout=%s", drainHistory-15*time.Second))
		}
		env, envCfg, err := controlPlane(ctx, *cbor, *hold && withSharded && planes[0], []runtime.Object{workload.CRD(), workload.AppCRD()}, extra...)
		if err != nil {
			log.Fatal(err)
		}
		defer env.Stop()
		cfg, kubeconfig = envCfg, env.KubeconfigPath()
	}
	if cfg != nil {
		if c, err = newCluster(cfg); err != nil {
			log.Fatal(err)
		}
		c.quietFor = quietFor
	}
	want := map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		if p = strings.TrimSpace(p); p != "" {
			want[p] = true
		}
	}

	if want["drain"] {
		if len(want) > 1 || *hold || plan != nil || c == nil {
			log.Fatal("--phases=drain runs the paired backlog drain alone, on its own control plane or --kubeconfig's: give it without other phases, --hold or --sizes")
		}
		for _, n := range drainContenders {
			if bins[n] == "" {
				log.Fatalf("--phases=drain pairs %s: give --contenders with both", strings.Join(drainContenders[:], " and "))
			}
		}
		counts := *workers
		if !set["workers"] {
			counts = workerCounts{1, 2, 4}
		}
		dir := filepath.Join(*out, "drain")
		if set["out"] {
			dir = *out
		}
		history := drainHistory
		if *attach != "" {
			history = 0 // the cluster's own
		}
		o := drainOpts{n: *drainEvents, rounds: *drainRounds, retries: 2, workers: counts, writers: 64,
			history: history, deadline: *deadline, kubeconfig: kubeconfig, logDir: logDir, profileDir: profileDir}
		if err := runDrain(ctx, c, bins, o, dir, "make bench"+argsSuffix(), logf); err != nil {
			log.Fatal(err)
		}
		return
	}
	if len(*workers) != 1 {
		log.Fatal("--workers: one count, but for --phases=drain")
	}

	if *hold {
		if withSharded && !slices.Contains(kinds, workload.ConfigMaps) {
			kinds = append(kinds, workload.ConfigMaps) // the sharded workload's objects
		}
		for _, k := range kinds {
			n := max(1, int(float64(wf[k].n)**scale))
			if err := c.setUp(ctx, k, n, 32); err != nil {
				log.Fatal(err)
			}
			logf("%s: %d created in namespace %s", k, n, namespaceFor(k))
		}
		fmt.Println(kubeconfig)
		<-ctx.Done()
		return
	}

	var (
		results   []*Result
		floorRuns []FloorRun
		shardRuns []*ShardedRun
		fleetRun  *FleetRun
		created   = map[workload.Kind]bool{}
		done      []workload.Kind // the workloads of the contenders' table run so far
	)
	// write writes results.json, results.md and the charts from what was
	// measured so far: after every workload (every size with --sizes), so
	// that an interrupted run keeps them, and at the end (final), when the
	// table is also printed. partial says what the figures are so far.
	write := func(final bool, partial string) {
		sum := summarize(results, names, done)
		sum.Command = "make bench" + argsSuffix()
		sum.Elapsed = time.Since(start).Round(time.Second).String()
		sum.Date = time.Now().UTC().Format(time.RFC3339)
		sum.Workers = (*workers)[0]
		sum.Repeats = *repeats
		sum.CBOR = *cbor
		sum.Machine = machine(loadStart)
		sum.Sharded = summarizeShardedCurve(shardRuns, ringSizes)
		sum.Targets = append(sum.Targets, shardedTargets(sum.Sharded)...)
		sum.Fleet = fleetRun
		sum.Targets = append(sum.Targets, fleetTargets(fleetRun)...)
		if plan != nil {
			sum.Scale = summarizeScale(results, floorRuns, names, plan)
		} else {
			sum.Floor = summarizeFloor(floorRuns, results)
		}
		if !final {
			sum.Partial = partial
		}
		table := renderTable(sum)
		if final {
			fmt.Print(table)
		}
		js, err := json.MarshalIndent(struct {
			*Summary
			Runs []*Result `json:"runs"`
		}{sum, results}, "", "  ")
		if err != nil {
			logf("results.json: %v", err)
		}
		must(os.WriteFile(filepath.Join(*out, "results.json"), append(js, '\n'), 0o644))
		must(os.WriteFile(filepath.Join(*out, "results.md"), []byte(table), 0o644))
		wrote := "results.json,results.md"
		if len(sum.Workloads) > 0 { // the chart has a panel per workload of the contenders' table
			must(os.WriteFile(filepath.Join(*out, "chart.svg"), []byte(renderChart(sum)), 0o644))
			wrote += ",chart.svg"
		}
		if sum.Scale != nil {
			must(os.WriteFile(filepath.Join(*out, "scale.svg"), []byte(renderScaleChart(sum)), 0o644))
			wrote += ",scale.svg"
		}
		if final {
			logf("wrote %s/{%s}; contender logs in %s", *out, wrote, logDir)
		} else {
			logf("wrote %s/{%s} so far (%s)", *out, wrote, partial)
		}
	}

	if plan != nil {
		// The scale curve: each workload at each size, smallest first; the
		// objects of one size are deleted before the next size's are made.
		for wi, sw := range plan {
			k, f := sw.kind, wf[sw.kind]
			for _, n := range sw.sizes {
				if k != workload.Parents { // the parents are made again for every run
					logf("%s: creating %d", k, n)
					t0 := time.Now()
					if err := c.setUp(ctx, k, n, 32); err != nil {
						log.Fatal(err)
					}
					logf("%s: created %d in %.1fs", k, n, time.Since(t0).Seconds())
				}
				o := runOpts{
					kind: k, n: n, workers: (*workers)[0], stormRate: f.stormRate, rate: f.rate, duration: *duration, idle: *idle,
					burst: max(1, int(float64(f.burst)**scale)), backlog: max(1, int(float64(f.backlogMax)**scale)),
					deadline: *deadline, kubeconfig: kubeconfig, phases: want, logDir: logDir, profileDir: profileDir,
					memAfter: memAfter,
				}
				rs, fs, err := runWorkload(ctx, c, cfg, names, bins, o, *repeats, logf)
				results, floorRuns = append(results, rs...), append(floorRuns, fs...)
				if err != nil {
					log.Fatal(err)
				}
				write(false, fmt.Sprintf("written after %s at N=%d", k, n))
				if wi == len(plan)-1 && n == sw.sizes[len(sw.sizes)-1] {
					break // the control plane goes with its objects
				}
				// A collection of 100,000 may take longer to delete than
				// the server gives one request: it goes on deleting, and
				// waitGone waits for it.
				if err := c.tearDown(ctx, k); err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
					log.Fatalf("%s: delete the %d objects: %v", k, n, err)
				}
				if err := c.waitGone(ctx, k); err != nil {
					log.Fatal(err)
				}
			}
		}
		write(true, "")
		return
	}

	for at, k := range runs {
		if string(k) == fleetName {
			fo, err := newFleetOpts(*fleetSteps, *fleetFlood, *fleetRate, *scale, (*workers)[0], *cbor, memAfter, *deadline, logDir, profileDir)
			if *quick {
				fo.connIdle = 0 // no wait for idle connections to close
			}
			if err == nil {
				fleetRun, err = runFleetWorkload(ctx, bins["converge"], fo, logf)
			}
			if err != nil {
				write(false, "written after an error in "+fleetName)
				log.Fatal(err)
			}
			if at < len(runs)-1 {
				write(false, "written after "+fleetName)
			}
			continue
		}
		objs := k // the kind of objects the workload runs on
		if k == sharded {
			objs = workload.ConfigMaps
		}
		f := wf[objs]
		n := max(1, int(float64(f.n)**scale))
		if *attach == "" && objs != workload.Parents && !created[objs] && k != sharded { // the parents are made again for every run
			logf("%s: creating %d", objs, n)
			t0 := time.Now()
			if err := c.setUp(ctx, objs, n, 32); err != nil {
				log.Fatal(err)
			}
			created[objs] = true
			logf("%s: created %d in %.1fs", objs, n, time.Since(t0).Seconds())
		}
		o := runOpts{
			kind: objs, n: n, workers: (*workers)[0], stormRate: f.stormRate, rate: f.rate, duration: *duration, idle: *idle,
			burst: max(1, int(float64(f.burst)**scale)), backlog: max(1, int(float64(f.backlogMax)**scale)),
			deadline: *deadline, kubeconfig: kubeconfig, phases: want, logDir: logDir, profileDir: profileDir,
			memAfter: memAfter,
		}
		if k == sharded {
			curve := shardedCurve{planes: planes, sizes: shardedSizes, cbor: *cbor, quietFor: quietFor}
			if *attach != "" {
				curve.attached = c
			}
			before := shardRuns
			rs, err := curve.run(ctx, bins["converge"], o, *repeats, ringSizes, logf, func(rs []*ShardedRun, partial string) {
				shardRuns = append(before, rs...)
				write(false, partial)
			})
			shardRuns = append(before, rs...)
			if err != nil {
				write(false, "written after an error in "+sharded)
				log.Fatal(err)
			}
		} else {
			rs, fs, err := runWorkload(ctx, c, cfg, names, bins, o, *repeats, logf)
			results, floorRuns = append(results, rs...), append(floorRuns, fs...)
			if err != nil {
				log.Fatal(err)
			}
			done = append(done, k)
		}
		if *attach == "" && k != sharded && lastUse[objs] == at { // the sharded workload's planes go with their objects
			if err := c.tearDown(ctx, objs); err != nil {
				logf("%s: delete: %v", objs, err)
			}
		}
		if at < len(runs)-1 {
			write(false, "written after "+string(k))
		}
	}
	write(true, "")
}

// runWorkload runs every contender of names on the workload of o, repeats
// times, the order reversed on odd repeats; for the configmaps workload
// each repeat starts with the floor. The objects must exist (the parents
// are made again by every run). On an error it returns what was measured
// before it.
func runWorkload(ctx context.Context, c *cluster, cfg *rest.Config, names []string, bins map[string]string, o runOpts, repeats int, logf func(string, ...any)) ([]*Result, []FloorRun, error) {
	var (
		results   []*Result
		floorRuns []FloorRun
		k         = o.kind
	)
	for r := range repeats {
		if k == workload.ConfigMaps {
			fr, err := floor(ctx, cfg, o.n, r)
			if err != nil {
				return results, floorRuns, err
			}
			logf("%s: run %d: floor: list %.2fs, cpu %.2fs", k, r+1, fr.Seconds, fr.CPUSeconds)
			floorRuns = append(floorRuns, fr)
		}
		order := slices.Clone(names)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			logf("%s: run %d: %s", k, r+1, name)
			res, err := runContender(ctx, c, name, bins[name], o, r)
			if err != nil {
				return results, floorRuns, err
			}
			if k == workload.Parents {
				logf("%s: run %d: %s: converged %.2fs (writes %.0f, last %.2fs), cpu %.2fs, heap %.1f MiB, rss %.1f MiB, idle writes %.0f, rollout %.2fs (ConfigMaps %.2fs, writes %.0f), drift %.2fs (writes %.0f), shutdown %.2fs, missed %d; requests %v, conflicts %v",
					k, r+1, name, res.SyncSeconds, res.SyncWrites, res.SyncQuietSeconds, res.CPUSeconds, res.HeapBytes/(1<<20), res.RSSBytes/(1<<20), res.IdleWrites,
					res.RolloutSeconds, res.RolloutCMSeconds, res.RolloutWrites, res.DriftSeconds, res.DriftWrites, res.ShutdownSeconds, res.Missed, res.RequestsByResource, res.Conflicts)
			} else {
				logf("%s: run %d: %s: sync %.2fs, cpu %.2fs, heap %.1f MiB, rss %.1f MiB, storm p99 %.0fms (n=%d), p99 %.1fms, burst %.0f/s, backlog %.0f/s, shutdown %.2fs, missed %d",
					k, r+1, name, res.SyncSeconds, res.CPUSeconds, res.HeapBytes/(1<<20), res.RSSBytes/(1<<20), res.StormP99Ms, res.StormCount,
					res.UpdateP99Ms, res.BurstPerSec, res.BacklogPerSec, res.ShutdownSeconds, res.Missed)
			}
			results = append(results, res)
			if ctx.Err() != nil {
				return results, floorRuns, ctx.Err()
			}
		}
	}
	return results, floorRuns, nil
}

// argsSuffix renders the flags given, for the "made by" line.
func argsSuffix() string {
	var args []string
	flag.Visit(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	if len(args) == 0 {
		return ""
	}
	return " BENCH_ARGS='" + strings.Join(args, " ") + "'"
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
