package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// Result is what one run of one contender on one workload measured.
type Result struct {
	Contender string `json:"contender"`
	Workload  string `json:"workload"`
	Repeat    int    `json:"repeat"`
	Objects   int    `json:"objects"`

	SyncSeconds    float64 `json:"syncSeconds"`    // start to every object reconciled once
	SyncCPUSeconds float64 `json:"syncCpuSeconds"` // CPU used by then
	HeapBytes      float64 `json:"heapBytes"`      // HeapAlloc after sync, after a GC
	// CacheEstimateBytes is converge's own estimate of its cache's heap
	// bytes after sync (the informers' InformerStats.Bytes and the shared
	// values'), asked right after HeapBytes; 0 for the other contenders.
	CacheEstimateBytes float64 `json:"cacheEstimateBytes,omitempty"`
	RSSBytes           float64 `json:"rssBytes"`     // VmRSS after sync
	PeakRSSBytes       float64 `json:"peakRssBytes"` // VmHWM at the end
	// The first sync, until every object was reported once: the maxima
	// of heap objects (live and unswept garbage), of the live heap as of
	// the last GC and of the heap goal, sampled every 5 ms (see
	// internal/report); GC cycles by then; VmHWM then. And the largest
	// heap objects before the first reconcile: the caches' sync alone.
	SyncPeakHeapBytes float64 `json:"syncPeakHeapBytes,omitempty"`
	SyncPeakLiveBytes float64 `json:"syncPeakLiveBytes,omitempty"`
	SyncPeakGoalBytes float64 `json:"syncPeakGoalBytes,omitempty"`
	SyncGCs           float64 `json:"syncGcs,omitempty"`
	SyncPeakRSSBytes  float64 `json:"syncPeakRssBytes,omitempty"`
	ListPeakHeapBytes float64 `json:"listPeakHeapBytes,omitempty"`

	StormCount int     `json:"stormCount"` // changes made while the initial keys drained
	StormP50Ms float64 `json:"stormP50Ms"`
	StormP99Ms float64 `json:"stormP99Ms"`
	StormMaxMs float64 `json:"stormMaxMs"`

	UpdateRate  float64 `json:"updateRate"` // fixed rate, updates/s
	UpdateCount int     `json:"updateCount"`
	UpdateP50Ms float64 `json:"updateP50Ms"`
	UpdateP99Ms float64 `json:"updateP99Ms"`
	UpdateMaxMs float64 `json:"updateMaxMs"`

	BurstCount  int     `json:"burstCount"`
	BurstPerSec float64 `json:"burstPerSec"` // updates seen per second, first write to last seen

	BacklogCount   int     `json:"backlogCount"`
	BacklogSeconds float64 `json:"backlogSeconds"` // SIGCONT to every update seen
	BacklogPerSec  float64 `json:"backlogPerSec"`
	BacklogCPU     float64 `json:"backlogCpuSeconds"` // CPU the contender used draining it

	// The reads phase (see readCosts), in the contender's reconcile's
	// way of reading its cache: Gets of random keys, a reconcile's four
	// Gets (its object and three children), a List of every object,
	// and that List's time per 1,000 objects listed.
	ReadGetP50Us       float64 `json:"readGetP50Us,omitempty"`
	ReadGetP99Us       float64 `json:"readGetP99Us,omitempty"`
	ReadReconcileP50Us float64 `json:"readReconcileP50Us,omitempty"`
	ReadReconcileP99Us float64 `json:"readReconcileP99Us,omitempty"`
	ReadListMs         float64 `json:"readListMs,omitempty"`
	ReadListed         int     `json:"readListed,omitempty"`
	ReadList1000Ms     float64 `json:"readList1000Ms,omitempty"`

	// The parents workload (see runParents). Requests are the contender's,
	// from kube-apiserver's apiserver_request_total: phase -> verb -> count.
	Requests map[string]map[string]float64 `json:"requests,omitempty"`
	// RequestsByResource: phase -> "resource[/subresource] VERB" -> count.
	RequestsByResource map[string]map[string]float64 `json:"requestsByResource,omitempty"`
	Conflicts          map[string]float64            `json:"conflicts,omitempty"` // phase -> requests answered 409
	SyncWrites         float64                       `json:"syncWrites,omitempty"`
	// Sync-, Rollout- and DriftQuietSeconds: the phase's start to the last
	// write seen (the contender then wrote nothing for quietFor).
	SyncQuietSeconds    float64 `json:"syncQuietSeconds,omitempty"`
	RolloutQuietSeconds float64 `json:"rolloutQuietSeconds,omitempty"`
	DriftQuietSeconds   float64 `json:"driftQuietSeconds,omitempty"`
	IdleSeconds         float64 `json:"idleSeconds,omitempty"`
	IdleWrites          float64 `json:"idleWrites,omitempty"`
	RolloutSeconds      float64 `json:"rolloutSeconds,omitempty"`   // first patch to every parent converged again
	RolloutCMSeconds    float64 `json:"rolloutCmSeconds,omitempty"` // first patch to every ConfigMap holding the new data
	RolloutCPU          float64 `json:"rolloutCpuSeconds,omitempty"`
	RolloutWrites       float64 `json:"rolloutWrites,omitempty"`
	Drifted             int     `json:"drifted,omitempty"`
	DriftSeconds        float64 `json:"driftSeconds,omitempty"` // first hand change to every one reverted
	DriftWrites         float64 `json:"driftWrites,omitempty"`

	CPUSeconds      float64 `json:"cpuSeconds"`      // whole run, utime+stime
	ShutdownSeconds float64 `json:"shutdownSeconds"` // SIGTERM to exit
	Missed          int     `json:"missed"`          // updates (and objects) never seen within the deadline
	WriteErrors     int64   `json:"writeErrors"`
}

// runOpts are the sizes and rates of one workload.
type runOpts struct {
	kind       workload.Kind
	n          int
	workers    int
	stormRate  float64
	rate       float64
	duration   time.Duration
	idle       time.Duration // parents: the idle window
	burst      int
	backlog    int
	deadline   time.Duration
	kubeconfig string
	logDir     string
	profileDir string // non-empty: CPU and heap profiles go here
	phases     map[string]bool
	memAfter   time.Duration // how long after sync memory is read
	// serverFilter: kube-apiserver filters sharded lists and watches
	// (the ShardedListAndWatch feature gate).
	serverFilter bool
}

// objectIndex maps "namespace/name" of the n objects of kind k to their
// index.
func objectIndex(k workload.Kind, n int) map[string]int {
	ns := namespaceFor(k)
	index := make(map[string]int, n)
	for i := range n {
		index[ns+"/"+workload.Name(k, i)] = i
	}
	return index
}

// runContender runs the contender binary bin through every phase: one
// process for start-up (undisturbed), memory, fixed-rate updates, the burst
// and the backlog; then, when asked, a second one started during a storm of
// changes.
func runContender(ctx context.Context, c *cluster, name, bin string, o runOpts, repeat int) (*Result, error) {
	res := &Result{Contender: name, Workload: string(o.kind), Repeat: repeat, Objects: o.n}
	if o.kind == workload.Parents {
		if err := runParents(ctx, c, name, bin, o, repeat, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	if err := runProcess(ctx, c, name, bin, o, repeat, false, res); err != nil {
		return nil, err
	}
	if o.phases["storm"] {
		if err := runProcess(ctx, c, name, bin, o, repeat, true, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runProcess runs one contender process: with storm, only its start-up
// while changes are written, then its shutdown; otherwise every other phase.
func runProcess(ctx context.Context, c *cluster, name, bin string, o runOpts, repeat int, storm bool, res *Result) error {
	t := newTracker(objectIndex(o.kind, o.n))
	w := &writer{c: c, kind: o.kind}
	w.gen.Store(time.Now().UnixNano() / 1000) // above every gen already written
	tag := fmt.Sprintf("%s-%s-%d", o.kind, name, repeat)
	if storm {
		tag += "-storm"
	}
	logf, err := os.Create(filepath.Join(o.logDir, tag+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()

	dropFromPageCache(bin)
	args := []string{"--kind=" + string(o.kind), "--kubeconfig=" + o.kubeconfig, "--workers=" + strconv.Itoa(o.workers)}
	if name == compactContender {
		args = append(args, "--compact")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.Env = os.Environ()
	if o.profileDir != "" {
		cmd.Env = append(cmd.Env, "BENCH_CPUPROFILE="+filepath.Join(o.profileDir, tag+".cpu.pprof"))
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	// exited is closed once the process has exited; waitErr is then its error.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		t.read(stdout)
		waitErr = cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	kill := func() { _ = cmd.Process.Kill() }
	defer func() {
		kill()
		<-exited
	}()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s (log: %s)", tag, fmt.Sprintf(format, args...), logf.Name())
	}

	// Start-up. In the storm run, changes are written from the start until
	// every object was reconciled once: the changes a restarted controller
	// must pick up while it is still catching up.
	perm := rand.New(rand.NewPCG(uint64(repeat), 7)).Perm(o.n)
	stormDone := make(chan int, 1)
	go func() {
		if !storm {
			stormDone <- 0
			return
		}
		stormDone <- w.paced(ctx, t, perm[:o.n/2], o.stormRate, phaseStorm, t.allSeen)
	}()
	select {
	case <-t.allSeen:
	case <-time.After(o.deadline + 2*time.Minute):
		n, _ := t.seen()
		res.Missed += o.n - n
	case <-exited:
		return fail("exited during start-up: %v", waitErr)
	}
	syncCPU, _ := cpuSeconds(pid)
	_, lastFirst := t.seen()
	if !storm {
		_, _ = io.WriteString(stdin, "syncdone\n") // ends the contender's peak sampling
		if hwm, err := procStatus(pid, "VmHWM"); err == nil {
			res.SyncPeakRSSBytes = float64(hwm)
		}
	}
	if storm {
		res.StormCount = <-stormDone
		res.Missed += t.waitPhase(phaseStorm, o.deadline)
		lat, _ := t.results(phaseStorm)
		res.StormP50Ms, res.StormP99Ms, res.StormMaxMs = percentiles(lat)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
		}
		res.WriteErrors += w.errs.Load()
		return nil
	}
	<-stormDone
	res.SyncSeconds = time.Unix(0, lastFirst).Sub(start).Seconds()
	res.SyncCPUSeconds = syncCPU
	var lat []time.Duration

	// Memory after sync.
	time.Sleep(o.memAfter)
	if rss, err := procStatus(pid, "VmRSS"); err == nil {
		res.RSSBytes = float64(rss)
	}
	if _, err := io.WriteString(stdin, "mem\n"); err != nil {
		return fail("ask for memory stats: %v", err)
	}
	select {
	case m := <-t.mem:
		res.HeapBytes = float64(m.heapAlloc)
		res.SyncPeakHeapBytes, res.SyncPeakLiveBytes = float64(m.peakObjects), float64(m.peakLive)
		res.SyncPeakGoalBytes, res.SyncGCs = float64(m.peakGoal), float64(m.syncGCs)
		res.ListPeakHeapBytes = float64(m.peakBefore)
	case <-time.After(30 * time.Second):
		return fail("no memory stats")
	}
	if isConverge(name) {
		if _, err := io.WriteString(stdin, "status\n"); err != nil {
			return fail("ask for status: %v", err)
		}
		select {
		case line := <-t.status:
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "cacheBytes="); ok {
					res.CacheEstimateBytes, _ = strconv.ParseFloat(v, 64)
				}
			}
		case <-time.After(30 * time.Second):
			return fail("no status")
		}
	}
	if o.profileDir != "" {
		p := filepath.Join(o.profileDir, tag+".heap.pprof")
		fmt.Fprintf(stdin, "heap %s\n", p)
		select {
		case <-t.acks:
		case <-time.After(30 * time.Second):
		}
	}

	// Read costs, on a quiet cache.
	if o.phases["reads"] {
		if err := readCosts(stdin, t.reads, o.n, res); err != nil {
			return fail("%v", err)
		}
	}

	// Updates at a fixed rate.
	if o.phases["steady"] {
		steady := min(o.n, int(o.rate*o.duration.Seconds()))
		res.UpdateRate = o.rate
		res.UpdateCount = w.paced(ctx, t, perm[o.n/2:][:min(steady, o.n-o.n/2)], o.rate, phaseSteady, nil)
		res.Missed += t.waitPhase(phaseSteady, o.deadline)
		lat, _ = t.results(phaseSteady)
		res.UpdateP50Ms, res.UpdateP99Ms, res.UpdateMaxMs = percentiles(lat)
	}

	// A burst, as fast as the API server takes it.
	if o.phases["burst"] {
		burst := min(o.burst, o.n)
		burstStart := time.Now()
		w.flood(ctx, t, perm[:burst], 64, phaseBurst)
		res.Missed += t.waitPhase(phaseBurst, o.deadline)
		lat, lastAt := t.results(phaseBurst)
		_ = lastAt
		res.BurstCount = len(lat)
		if d := time.Unix(0, lastAt).Sub(burstStart).Seconds(); d > 0 {
			res.BurstPerSec = float64(len(lat)) / d
		}
	}

	// A backlog: the contender is paused while every object changes.
	if o.phases["backlog"] {
		backlog := min(o.backlog, o.n)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fail("SIGSTOP: %v", err)
		}
		w.flood(ctx, t, perm[:backlog], 64, phaseBacklog)
		resumed := time.Now()
		cpuBefore, _ := cpuSeconds(pid)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return fail("SIGCONT: %v", err)
		}
		res.Missed += t.waitPhase(phaseBacklog, o.deadline+time.Minute)
		cpuAfter, _ := cpuSeconds(pid)
		res.BacklogCPU = cpuAfter - cpuBefore
		lat, lastAt := t.results(phaseBacklog)
		res.BacklogCount = len(lat)
		if d := time.Unix(0, lastAt).Sub(resumed).Seconds(); d > 0 {
			res.BacklogSeconds = d
			res.BacklogPerSec = float64(len(lat)) / d
		}
	}

	// The end: CPU, peak memory, shutdown.
	res.CPUSeconds, _ = cpuSeconds(pid)
	if hwm, err := procStatus(pid, "VmHWM"); err == nil {
		res.PeakRSSBytes = float64(hwm)
	}
	stopAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fail("SIGTERM: %v", err)
	}
	select {
	case <-exited:
		res.ShutdownSeconds = time.Since(stopAt).Seconds()
		if waitErr != nil {
			fmt.Fprintf(os.Stderr, "  %s exited: %v\n", tag, waitErr)
		}
	case <-time.After(time.Minute):
		kill()
		<-exited
		res.ShutdownSeconds = time.Since(stopAt).Seconds()
	}
	res.WriteErrors += w.errs.Load()
	return nil
}

// percentiles returns p50, p99 and max in milliseconds.
func percentiles(d []time.Duration) (p50, p99, mx float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return float64(d[i]) / 1e6
	}
	return at(0.50), at(0.99), float64(d[len(d)-1]) / 1e6
}

// cpuSeconds returns the user plus system CPU time of pid.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields count from after ')'.
	rest := b[bytes.LastIndexByte(b, ')')+2:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procStatus reads field (a size in kB, such as VmRSS) of
// /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) (uint64, error) {
	st, err := procStatusFields(pid)
	if err != nil {
		return 0, err
	}
	v, ok := st[field]
	if !ok {
		return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
	}
	return v, nil
}

// procStatusFields reads the sizes of /proc/<pid>/status (the fields in
// kB), in bytes, at one moment.
func procStatusFields(pid int) (map[string]uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			out[name] = n * 1024
		}
	}
	return out, nil
}

// readCosts asks the contender for its read costs over its n objects
// ("reads", see internal/report) and records them in res.
func readCosts(stdin io.Writer, replies <-chan string, n int, res *Result) error {
	if _, err := fmt.Fprintf(stdin, "reads %d\n", n); err != nil {
		return fmt.Errorf("ask for read costs: %w", err)
	}
	var line string
	select {
	case line = <-replies:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("no read costs")
	}
	fields, errText, _ := strings.Cut(line, "err=")
	if errText = strings.TrimSpace(errText); errText != "-" {
		return fmt.Errorf("read costs: %s", errText)
	}
	for _, f := range strings.Fields(fields) {
		k, v, _ := strings.Cut(f, "=")
		x, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "getP50":
			res.ReadGetP50Us = x
		case "getP99":
			res.ReadGetP99Us = x
		case "reconcileP50":
			res.ReadReconcileP50Us = x
		case "reconcileP99":
			res.ReadReconcileP99Us = x
		case "listMs":
			res.ReadListMs = x
		case "listed":
			res.ReadListed = int(x)
		}
	}
	if res.ReadListed > 0 {
		res.ReadList1000Ms = res.ReadListMs / float64(res.ReadListed) * 1000
	}
	return nil
}
