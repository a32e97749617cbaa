package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// The paired large-backlog drain (--phases=drain): converge and the
// hand-written client-go controller run side by side on the same N
// ConfigMaps. Each round both are stopped with SIGSTOP, every ConfigMap is
// patched once, and then one is continued and drains the backlog, and after
// it the other: the same writes feed both drains, so each round is one pair.
// kube-apiserver closes the watch of a stopped process once its buffer is
// full; when the process continues, its reflector watches again from the
// last resourceVersion it saw and the watch cache replays the rest. A round
// counts only if the API server's metrics show that: watchers terminated, and
// no list of ConfigMaps (which would make the drain a re-sync).

// drainContenders are the two contenders of the drain, converge first.
var drainContenders = [2]string{"converge", "client-go"}

// drainOpts are the drain's sizes.
type drainOpts struct {
	n       int   // ConfigMaps, and events per drain
	rounds  int   // valid rounds per worker count
	retries int   // extra attempts of a round that did not count
	workers []int // worker counts, one pair of processes each
	writers int   // concurrent writers of the backlog
	// history is kube-apiserver's watch history window (its
	// --request-timeout plus 15 s), 0 if unknown (--kubeconfig): the
	// backlog must be written within it for the watch cache to hold it all.
	history    time.Duration
	deadline   time.Duration
	kubeconfig string
	logDir     string
	profileDir string // non-empty: a CPU profile of every drain goes here
}

// DrainDrain is one contender's drain of one round.
type DrainDrain struct {
	Seconds    float64 `json:"seconds"`    // SIGCONT to the last of the N updates reported
	PerSec     float64 `json:"perSec"`     // N / Seconds
	CPUSeconds float64 `json:"cpuSeconds"` // the process's utime+stime over the drain
	CPUPerEvUs float64 `json:"cpuPerEventUs"`
	Missed     int     `json:"missed"` // updates not reported by the deadline
	Lists      float64 `json:"lists"`  // ConfigMap LISTs and watch-lists during the drain
}

// DrainRound is one attempt of one round.
type DrainRound struct {
	Workers      int        `json:"workers"`
	Round        int        `json:"round"`
	Attempt      int        `json:"attempt"`
	First        string     `json:"first"` // the contender continued first
	WriteSeconds float64    `json:"writeSeconds"`
	WriteErrors  int64      `json:"writeErrors"`
	Converge     DrainDrain `json:"converge"`
	ClientGo     DrainDrain `json:"clientGo"`
	Ratio        float64    `json:"ratio"` // converge's rate over client-go's
	// Terminated is the rise of apiserver_terminated_watchers_total for
	// ConfigMaps over the round; WriteLists the ConfigMap lists while the
	// backlog was written; WatchCacheCapacity the watch cache's capacity
	// for ConfigMaps after the writes.
	Terminated         float64 `json:"terminatedWatchers"`
	WriteLists         float64 `json:"writeLists"`
	WatchCacheCapacity float64 `json:"watchCacheCapacity"`
	// Pairs is how many pairs (worker counts) the round's write fed, all
	// stopped while it was written: Terminated should be twice that.
	Pairs int    `json:"pairs"`
	Valid bool   `json:"valid"`
	Why   string `json:"why,omitempty"` // why it does not count
}

// DrainSet is the summary of one worker count.
type DrainSet struct {
	Workers int        `json:"workers"`
	Stats   ratioStats `json:"stats"`
	// Median rates (events/s) and CPU per event (µs) over the valid rounds.
	ConvergePerSec     float64 `json:"convergePerSec"`
	ClientGoPerSec     float64 `json:"clientGoPerSec"`
	ConvergeCPUPerEvUs float64 `json:"convergeCpuPerEventUs"`
	ClientGoCPUPerEvUs float64 `json:"clientGoCpuPerEventUs"`
	// The order effect: the median r of the rounds converge drained first
	// and of those client-go drained first.
	ConvergeFirstR  float64 `json:"convergeFirstMedianR"`
	ClientGoFirstR  float64 `json:"clientGoFirstMedianR"`
	ConvergeFirstN  int     `json:"convergeFirstRounds"`
	ClientGoFirstN  int     `json:"clientGoFirstRounds"`
	InvalidAttempts int     `json:"invalidAttempts"`
	Incomplete      string  `json:"incomplete,omitempty"`
}

// DrainSummary is what results/drain holds.
type DrainSummary struct {
	Command string        `json:"command"`
	Date    string        `json:"date"`
	Elapsed string        `json:"elapsed"`
	Machine string        `json:"machine"`
	Load    []string      `json:"loadDuringRun"` // 1-minute load averages read at each round
	Objects int           `json:"objects"`
	History string        `json:"watchHistoryWindow,omitempty"` // kube-apiserver's, when the bench started it
	Rounds  int           `json:"rounds"`
	Partial string        `json:"partial,omitempty"`
	Sets    []DrainSet    `json:"sets"`
	Runs    []*DrainRound `json:"runs"`
}

// drainProc is one contender process of the drain.
type drainProc struct {
	name    string
	workers int
	pid     int
	t       *tracker
	cmd     *exec.Cmd
	stdin   io.WriteCloser // kept open: a contender exits when its standard input closes
	exited  chan struct{}
	err     error // the process's exit, once exited is closed
	log     string
}

func startDrainProc(name, bin string, o drainOpts, workers int, index map[string]int) (*drainProc, error) {
	tag := fmt.Sprintf("drain-%s-w%d", name, workers)
	logFile, err := os.Create(filepath.Join(o.logDir, tag+".log"))
	if err != nil {
		return nil, err
	}
	dropFromPageCache(bin)
	cmd := exec.Command(bin, "--kind="+string(workload.ConfigMaps), "--kubeconfig="+o.kubeconfig, "--workers="+strconv.Itoa(workers))
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &drainProc{name: name, workers: workers, pid: cmd.Process.Pid, t: newTracker(index), cmd: cmd, stdin: stdin, exited: make(chan struct{}), log: logFile.Name()}
	go func() {
		p.t.read(stdout)
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// profile starts the process's CPU profile into path, or with "" stops it,
// and waits for its answer.
func (p *drainProc) profile(path string) error {
	if _, err := fmt.Fprintln(p.stdin, strings.TrimSpace("cpuprofile "+path)); err != nil {
		return fmt.Errorf("drain: ask %s for a CPU profile: %w", p.name, err)
	}
	select {
	case <-p.t.acks:
		return nil
	case <-p.exited:
		return fmt.Errorf("drain: %s exited: %v (log: %s)", p.name, p.err, p.log)
	case <-time.After(time.Minute):
		return fmt.Errorf("drain: %s did not answer cpuprofile", p.name)
	}
}

// stop ends the process (continuing it first, if it was stopped).
func (p *drainProc) stop() {
	_ = syscall.Kill(p.pid, syscall.SIGCONT)
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// drainCounters are the API server's counters a round is checked with.
type drainCounters struct {
	terminated float64 // apiserver_terminated_watchers_total, ConfigMaps
	lists      float64 // LIST requests of ConfigMaps, plus watch-lists (streaming lists)
	capacity   float64 // watch_cache_capacity (no apiserver_ prefix), ConfigMaps
}

func (c *cluster) scrapeDrain(ctx context.Context) (drainCounters, error) {
	body, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return drainCounters{}, fmt.Errorf("read kube-apiserver's /metrics: %w", err)
	}
	return parseDrainCounters(body), nil
}

// parseDrainCounters reads the counters of ConfigMaps from a /metrics body.
func parseDrainCounters(body []byte) drainCounters {
	var d drainCounters
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if open < 0 || end < open {
			continue
		}
		name := line[:open]
		switch name {
		case "apiserver_terminated_watchers_total", "apiserver_request_total", "apiserver_watch_list_duration_seconds_count", "watch_cache_capacity":
		default:
			continue
		}
		l := parseLabels(line[open+1 : end])
		if l["resource"] != "configmaps" || l["group"] != "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		switch name {
		case "apiserver_terminated_watchers_total":
			d.terminated += v
		case "apiserver_request_total":
			if l["verb"] == "LIST" {
				d.lists += v
			}
		case "apiserver_watch_list_duration_seconds_count":
			d.lists += v
		case "watch_cache_capacity":
			d.capacity = v
		}
	}
	return d
}

// drainBudget estimates the drain's length, printed at its start: one write
// per round feeds every worker count's pair.
func drainBudget(o drainOpts) time.Duration {
	const writesPerSec = 750 // measured on 2 cores: results/results.md's backlog
	write := time.Duration(float64(o.n) / writesPerSec * float64(time.Second))
	start := time.Duration(float64(o.n)/10000*float64(time.Second)) * 5 * time.Duration(len(o.workers))
	drains := time.Duration(len(o.workers)) * 2 * time.Duration(float64(o.n)/10000*float64(time.Second))
	return 2*write + start + time.Duration(o.rounds)*(write+drains+5*time.Second)
}

// runDrain runs the drain on the N ConfigMaps (created here if missing) and
// writes its results into dir after every worker count.
func runDrain(ctx context.Context, c *cluster, bins map[string]string, o drainOpts, dir, command string, logf func(string, ...any)) error {
	start, loadStart := time.Now(), loadAverage()
	logf("drain: %d ConfigMaps, %d rounds at each of %v workers; about %s on 2 cores otherwise idle", o.n, o.rounds, o.workers, drainBudget(o).Round(time.Minute))
	t0 := time.Now()
	if err := c.setUp(ctx, workload.ConfigMaps, o.n, 32); err != nil {
		return err
	}
	logf("drain: %d ConfigMaps there after %.1fs", o.n, time.Since(t0).Seconds())
	sum := &DrainSummary{Command: command, Objects: o.n, Rounds: o.rounds}
	if o.history > 0 {
		sum.History = o.history.String()
	}
	write := func(partial string) error {
		sum.Date = time.Now().UTC().Format(time.RFC3339)
		sum.Elapsed = time.Since(start).Round(time.Second).String()
		sum.Machine = machine(loadStart)
		sum.Partial = partial
		return writeDrain(dir, sum)
	}
	index := objectIndex(workload.ConfigMaps, o.n)
	w := &writer{c: c, kind: workload.ConfigMaps}
	w.gen.Store(time.Now().UnixNano() / 1000) // above every gen already written
	sum.Sets = make([]DrainSet, len(o.workers))
	for k, workers := range o.workers {
		sum.Sets[k] = DrainSet{Workers: workers}
	}
	setsOf := func(pairs []*drainPair) {
		for k, pr := range pairs {
			if pr != nil {
				sum.Sets[k] = pr.summary()
			}
		}
	}
	// After every write round, so that an interrupted run keeps its rounds.
	onRound := func(pairs []*drainPair) {
		setsOf(pairs)
		if err := write(fmt.Sprintf("written after write round %d", len(sum.Load))); err != nil {
			logf("drain: write %s: %v", dir, err)
		}
	}
	pairs, err := drainAll(ctx, c, bins, o, index, w, sum, onRound, logf)
	setsOf(pairs)
	partial := ""
	switch {
	case ctx.Err() != nil:
		partial = fmt.Sprintf("interrupted after %d write rounds", len(sum.Load))
	case err != nil:
		partial = fmt.Sprintf("written after an error: %v", err)
	}
	if werr := write(partial); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	logf("drain: wrote %s", dir)
	// What the API server says of its ConfigMap watchers and watch cache,
	// for the record (the contenders' logs are beside it).
	if body, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err == nil {
		var keep []string
		for _, line := range strings.Split(string(body), "\n") {
			if strings.Contains(line, `resource="configmaps"`) && (strings.Contains(line, "watch") || strings.Contains(line, "terminated")) {
				keep = append(keep, line)
			}
		}
		p := filepath.Join(o.logDir, "drain-apiserver-metrics.txt")
		if os.WriteFile(p, []byte(strings.Join(keep, "\n")+"\n"), 0o644) == nil {
			logf("drain: kube-apiserver's metrics of ConfigMap watches in %s", p)
		}
	}
	return nil
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// drainPair is the two processes of one worker count, converge first, and
// its rounds so far.
type drainPair struct {
	procs    [2]*drainProc
	set      DrainSet
	valid    []*DrainRound
	attempts int  // failed attempts of the current round
	done     bool // o.rounds counted, or a round failed too often
}

// drainAll runs the rounds of every worker count at once: one pair of
// processes per count, all started and synced; each write round stops every
// pair still running, writes the backlog once and lets the pairs drain it one
// after another, so that one write feeds every pair's round. A pair is done
// after o.rounds valid rounds (each retried up to o.retries times).
func drainAll(ctx context.Context, c *cluster, bins map[string]string, o drainOpts, index map[string]int, w *writer, sum *DrainSummary, onRound func([]*drainPair), logf func(string, ...any)) ([]*drainPair, error) {
	pairs := make([]*drainPair, len(o.workers))
	defer func() {
		for _, pr := range pairs {
			if pr != nil {
				pr.stop()
			}
		}
	}()
	for k, workers := range o.workers {
		pairs[k] = &drainPair{set: DrainSet{Workers: workers}}
		for i, name := range drainContenders {
			p, err := startDrainProc(name, bins[name], o, workers, index)
			if err != nil {
				return pairs, err
			}
			pairs[k].procs[i] = p
		}
	}
	for _, pr := range pairs {
		for _, p := range pr.procs {
			select {
			case <-p.t.allSeen:
			case <-p.exited:
				return pairs, fmt.Errorf("drain: %s exited during start-up: %v (log: %s)", p.name, p.err, p.log)
			case <-time.After(o.deadline + 10*time.Minute):
				return pairs, fmt.Errorf("drain: %s did not report all %d ConfigMaps (log: %s)", p.name, o.n, p.log)
			case <-ctx.Done():
				return pairs, ctx.Err()
			}
		}
	}
	logf("drain: all %d processes synced", 2*len(pairs))
	for wr := 0; ; wr++ {
		var active []*drainPair
		for _, pr := range pairs {
			if !pr.done {
				active = append(active, pr)
			}
		}
		if len(active) == 0 {
			return pairs, nil
		}
		if err := ctx.Err(); err != nil {
			return pairs, err
		}
		rds, err := drainRound(ctx, c, active, o, wr, w)
		if err != nil {
			return pairs, err
		}
		sum.Load = append(sum.Load, loadAverage())
		for k, pr := range active {
			rd := rds[k]
			sum.Runs = append(sum.Runs, rd)
			logf("drain: %d workers, round %d.%d (%s first): write %.1fs, converge %.2fs %.0f/s cpu %.2fs, client-go %.2fs %.0f/s cpu %.2fs, r %.3f; terminated %.0f, lists %.0f/%.0f/%.0f, cache %.0f: %s",
				rd.Workers, rd.Round+1, rd.Attempt, rd.First, rd.WriteSeconds, rd.Converge.Seconds, rd.Converge.PerSec, rd.Converge.CPUSeconds,
				rd.ClientGo.Seconds, rd.ClientGo.PerSec, rd.ClientGo.CPUSeconds, rd.Ratio, rd.Terminated, rd.WriteLists, rd.Converge.Lists, rd.ClientGo.Lists,
				rd.WatchCacheCapacity, cmpOr(rd.Why, "counts"))
			pr.record(rd, o)
		}
		onRound(pairs)
	}
}

// record counts rd in the pair's set, or one more failed attempt.
func (pr *drainPair) record(rd *DrainRound, o drainOpts) {
	if rd.Valid {
		pr.valid, pr.attempts = append(pr.valid, rd), 0
	} else {
		pr.set.InvalidAttempts++
		pr.attempts++
		if pr.attempts > o.retries {
			pr.set.Incomplete = fmt.Sprintf("round %d did not count in %d attempts", len(pr.valid)+1, pr.attempts)
		}
	}
	if len(pr.valid) >= o.rounds || pr.set.Incomplete != "" {
		pr.done = true
		pr.stop() // no longer stopped and written to with the others
	}
}

func (pr *drainPair) stop() {
	for i, p := range pr.procs {
		if p != nil {
			p.stop()
			pr.procs[i] = nil
		}
	}
}

func (pr *drainPair) summary() DrainSet {
	return summarizeDrain(pr.set, pr.valid, pr.set.Incomplete)
}

// drainRound runs one write round (wr) for the pairs given: it stops all
// their processes, writes the backlog, and lets each pair drain it in turn.
// A pair's round is the number of its valid rounds so far; converge drains
// first in its even rounds, client-go in its odd ones.
func drainRound(ctx context.Context, c *cluster, pairs []*drainPair, o drainOpts, wr int, w *writer) ([]*DrainRound, error) {
	before, err := c.scrapeDrain(ctx)
	if err != nil {
		return nil, err
	}
	var all []*drainProc
	for _, pr := range pairs {
		all = append(all, pr.procs[:]...)
	}
	for _, p := range all {
		if o.profileDir == "" {
			continue
		}
		// The profile runs from here to the end of the drain; the
		// process, stopped meanwhile, spends no CPU and so adds no samples.
		path := filepath.Join(o.profileDir, fmt.Sprintf("drain-%s-w%d-round%02d.cpu.pprof", p.name, p.workers, wr+1))
		if err := p.profile(path); err != nil {
			return nil, err
		}
	}
	for _, p := range all {
		if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("drain: SIGSTOP %s: %w", p.name, err)
		}
	}
	// One patch per object, in an order of its own each round, by
	// o.writers writers; every tracker expects each.
	perm := rand.New(rand.NewPCG(uint64(len(o.workers)), uint64(wr))).Perm(o.n)
	errs0 := w.errs.Load()
	t0 := time.Now()
	_ = parallel(ctx, o.n, o.writers, func(ctx context.Context, j int) error {
		i, gen := perm[j], w.gen.Add(1)
		for _, p := range all {
			p.t.expect(i, gen, phaseBacklog)
		}
		if err := c.patch(ctx, workload.ConfigMaps, i, gen); err != nil && ctx.Err() == nil {
			w.errs.Add(1)
		}
		return nil
	})
	writeSeconds, writeErrors := time.Since(t0).Seconds(), w.errs.Load()-errs0
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prev, err := c.scrapeDrain(ctx)
	if err != nil {
		return nil, err
	}
	rds := make([]*DrainRound, len(pairs))
	for k, pr := range pairs {
		rd := &DrainRound{Workers: pr.set.Workers, Round: len(pr.valid), Attempt: pr.attempts, WriteSeconds: writeSeconds, WriteErrors: writeErrors,
			WriteLists: prev.lists - before.lists, WatchCacheCapacity: prev.capacity, Pairs: len(pairs)}
		rds[k] = rd
		if prev, err = drainPairRound(ctx, c, pr, rd, o, prev); err != nil {
			return nil, err
		}
	}
	for _, rd := range rds {
		rd.Terminated = prev.terminated - before.terminated
		rd.judge(o)
	}
	return rds, nil
}

// drainPairRound lets the pair's two processes drain the backlog, one after
// the other, filling rd; prev are the counters before, and it returns those
// after.
func drainPairRound(ctx context.Context, c *cluster, pr *drainPair, rd *DrainRound, o drainOpts, prev drainCounters) (drainCounters, error) {
	order := pr.procs
	if rd.Round%2 == 1 {
		order[0], order[1] = order[1], order[0]
	}
	rd.First = order[0].name
	for _, p := range order {
		d := &rd.Converge
		if p.name != drainContenders[0] {
			d = &rd.ClientGo
		}
		cpu0, _ := cpuSeconds(p.pid)
		resumed := time.Now()
		if err := syscall.Kill(p.pid, syscall.SIGCONT); err != nil {
			return prev, fmt.Errorf("drain: SIGCONT %s: %w", p.name, err)
		}
		d.Missed = p.t.waitPhase(phaseBacklog, o.deadline+time.Minute)
		cpu1, _ := cpuSeconds(p.pid)
		if o.profileDir != "" {
			if err := p.profile(""); err != nil {
				return prev, err
			}
		}
		_, lastAt := p.t.results(phaseBacklog)
		d.CPUSeconds = cpu1 - cpu0
		d.CPUPerEvUs = d.CPUSeconds / float64(o.n) * 1e6
		if s := time.Unix(0, lastAt).Sub(resumed).Seconds(); s > 0 && d.Missed == 0 {
			d.Seconds, d.PerSec = s, float64(o.n)/s
		}
		after, err := c.scrapeDrain(ctx)
		if err != nil {
			return prev, err
		}
		d.Lists = after.lists - prev.lists
		prev = after
		select {
		case <-p.exited:
			return prev, fmt.Errorf("drain: %s exited: %v (log: %s)", p.name, p.err, p.log)
		default:
		}
		// What a drain missed stays pending and is settled (or not) by
		// the next round's reports.
	}
	return prev, nil
}

// judge sets whether rd counts, and why not.
func (rd *DrainRound) judge(o drainOpts) {
	var why []string
	for _, c := range []struct {
		name string
		d    *DrainDrain
	}{{drainContenders[0], &rd.Converge}, {drainContenders[1], &rd.ClientGo}} {
		if c.d.Missed > 0 {
			why = append(why, fmt.Sprintf("%s missed %d updates", c.name, c.d.Missed))
		}
		if c.d.Lists > 0 {
			why = append(why, fmt.Sprintf("%s's drain saw %.0f ConfigMap lists (a re-sync, not a replay)", c.name, c.d.Lists))
		}
		if c.d.Missed == 0 && c.d.PerSec <= 0 {
			why = append(why, "a drain reported every update but no time after its SIGCONT")
		}
	}
	window := o.history
	if window == 0 { // another's cluster (--kubeconfig): assume the default
		window = 75 * time.Second
	}
	if (rd.Converge.Lists > 0 || rd.ClientGo.Lists > 0) && rd.WriteSeconds > window.Seconds() {
		// The watch cache doubles its capacity only while its oldest
		// event is younger than its history window, and halves it when a
		// quarter of it is older: a backlog written more slowly may not be
		// there to replay.
		why = append(why, fmt.Sprintf("the backlog took %.0f s to write, and the watch cache (capacity %.0f) keeps only what it grew to hold within %s",
			rd.WriteSeconds, rd.WatchCacheCapacity, window))
	}
	if rd.WriteLists > 0 {
		why = append(why, fmt.Sprintf("%.0f ConfigMap lists while the backlog was written", rd.WriteLists))
	}
	if want := 2 * max(1, rd.Pairs); rd.Terminated < float64(want) {
		why = append(why, fmt.Sprintf("only %.0f watchers of ConfigMaps terminated (want the %d stopped ones)", rd.Terminated, want))
	}
	if rd.WriteErrors > 0 {
		why = append(why, fmt.Sprintf("%d writes failed", rd.WriteErrors))
	}
	if rd.Converge.PerSec > 0 && rd.ClientGo.PerSec > 0 {
		rd.Ratio = rd.Converge.PerSec / rd.ClientGo.PerSec
	}
	rd.Valid, rd.Why = len(why) == 0, strings.Join(why, "; ")
}

// summarizeDrain fills set's statistics from its valid rounds.
func summarizeDrain(set DrainSet, valid []*DrainRound, incomplete string) DrainSet {
	set.Incomplete = incomplete
	var r, cgFirst, ccFirst, ccRate, cgRate, ccCPU, cgCPU []float64
	for _, rd := range valid {
		r = append(r, rd.Ratio)
		if rd.First == drainContenders[0] {
			ccFirst = append(ccFirst, rd.Ratio)
		} else {
			cgFirst = append(cgFirst, rd.Ratio)
		}
		ccRate, cgRate = append(ccRate, rd.Converge.PerSec), append(cgRate, rd.ClientGo.PerSec)
		ccCPU, cgCPU = append(ccCPU, rd.Converge.CPUPerEvUs), append(cgCPU, rd.ClientGo.CPUPerEvUs)
	}
	set.Stats = statsOfRatios(r)
	set.ConvergeFirstN, set.ClientGoFirstN = len(ccFirst), len(cgFirst)
	set.ConvergeFirstR, set.ClientGoFirstR = medianOr0(ccFirst), medianOr0(cgFirst)
	set.ConvergePerSec, set.ClientGoPerSec = medianOr0(ccRate), medianOr0(cgRate)
	set.ConvergeCPUPerEvUs, set.ClientGoCPUPerEvUs = medianOr0(ccCPU), medianOr0(cgCPU)
	return set
}

func medianOr0(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return median(v)
}

// writeDrain writes drain.md, drain.json and drain.svg into dir.
func writeDrain(dir string, sum *DrainSummary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "drain.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "drain.md"), []byte(renderDrain(sum)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "drain.svg"), []byte(renderDrainChart(sum)), 0o644)
}

// renderDrain is drain.md: per worker count the statistics, then every round.
func renderDrain(sum *DrainSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Paired backlog drain: converge vs client-go\n\n")
	fmt.Fprintf(&b, "`%s`, %s, %s. %s.\n\n", sum.Command, sum.Date, sum.Elapsed, sum.Machine)
	if sum.Partial != "" {
		fmt.Fprintf(&b, "**Partial**: %s.\n\n", sum.Partial)
	}
	fmt.Fprintf(&b, "%d ConfigMaps; per round the processes of every worker count still running are stopped, each ConfigMap is patched once, then, one worker count after another, one contender drains the %d updates and after it the other (converge first in the worker count's rounds 1, 3, 5, …). r = converge's rate ÷ client-go's in the same round. kube-apiserver's watch history window: %s. Load average (1 min) after each write round: %s.\n\n",
		sum.Objects, sum.Objects, cmpOr(sum.History, "75s"), strings.Join(sum.Load, " "))
	b.WriteString("| workers | valid rounds | wins (r > 1) | sign-test p (one-sided) | median r | HL r [CI] | converge events/s | client-go events/s | converge CPU/event (µs) | client-go CPU/event (µs) | median r, converge first / client-go first | rounds not counted |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sum.Sets {
		st := s.Stats
		ci := "too few rounds for a 90 % interval"
		if st.HLCoverage > 0 {
			ci = fmt.Sprintf("[%.3f, %.3f] (%.1f %%)", st.HLLo, st.HLHi, st.HLCoverage*100)
		}
		fmt.Fprintf(&b, "| %d | %d | %d/%d | %.3f | %.3f | %.3f %s | %.0f | %.0f | %.1f | %.1f | %.3f (%d) / %.3f (%d) | %d |\n",
			s.Workers, st.Pairs, st.Wins, st.Pairs, st.SignP, st.Median, st.HL, ci, s.ConvergePerSec, s.ClientGoPerSec,
			s.ConvergeCPUPerEvUs, s.ClientGoCPUPerEvUs, s.ConvergeFirstR, s.ConvergeFirstN, s.ClientGoFirstR, s.ClientGoFirstN, s.InvalidAttempts)
		if s.Incomplete != "" {
			fmt.Fprintf(&b, "\n%d workers: %s.\n\n", s.Workers, s.Incomplete)
		}
	}
	b.WriteString("\nHL: exp of the Hodges–Lehmann estimate on log r; CI from the Wilcoxon signed-rank test (exact coverage in brackets).\n\n")
	b.WriteString("## Rounds\n\n")
	b.WriteString("| workers | round | first | write (s) | converge drain (s) | events/s | CPU (s) | client-go drain (s) | events/s | CPU (s) | r | watchers terminated | lists (write/converge/client-go) | watch cache capacity | counts |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, rd := range sum.Runs {
		ok := "yes"
		if !rd.Valid {
			ok = "no: " + rd.Why
		}
		fmt.Fprintf(&b, "| %d | %d.%d | %s | %.1f | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.3f | %.0f | %.0f/%.0f/%.0f | %.0f | %s |\n",
			rd.Workers, rd.Round+1, rd.Attempt, rd.First, rd.WriteSeconds, rd.Converge.Seconds, rd.Converge.PerSec, rd.Converge.CPUSeconds,
			rd.ClientGo.Seconds, rd.ClientGo.PerSec, rd.ClientGo.CPUSeconds, rd.Ratio, rd.Terminated, rd.WriteLists, rd.Converge.Lists, rd.ClientGo.Lists, rd.WatchCacheCapacity, ok)
	}
	return b.String()
}

// renderDrainChart is the paired dot plot: per worker count, each valid
// round's two rates joined by a line (converge blue, client-go grey), and r.
func renderDrainChart(sum *DrainSummary) string {
	const (
		left, top, panelW, panelH, gap = 60, 50, 240, 260, 40
	)
	width := left + (panelW+gap)*max(1, len(sum.Sets)) + 10
	height := top + panelH + 76
	var hi float64
	for _, rd := range sum.Runs {
		hi = max(hi, rd.Converge.PerSec, rd.ClientGo.PerSec)
	}
	hi = max(hi*1.1, 1)
	y := func(v float64) float64 { return float64(top+panelH) - v/hi*panelH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Backlog drain of %d updates, paired by round (events/s, higher is better)</text>`+"\n", sum.Objects)
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">%s</text>`+"\n", esc(sum.Command))
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		v := t * hi
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f</text>`+"\n", left-6, y(v)+4, v)
	}
	for p, s := range sum.Sets {
		x0 := float64(left + p*(panelW+gap))
		xc, xg := x0+panelW*0.25, x0+panelW*0.75
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="%d" height="%d" fill="none" stroke="#e2e8f0"/>`+"\n", x0, top, panelW, panelH)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle" fill="#2b6cb0">converge</text><text x="%.0f" y="%d" text-anchor="middle" fill="#718096">client-go</text>`+"\n",
			xc, top+panelH+16, xg, top+panelH+16)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle" font-weight="bold">%d workers</text>`+"\n", x0+panelW/2, top+panelH+34, s.Workers)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%d/%d wins, p %.3f, median r %.2f</text>`+"\n",
			x0+panelW/2, top+panelH+50, s.Stats.Wins, s.Stats.Pairs, s.Stats.SignP, s.Stats.Median)
		for _, rd := range sum.Runs {
			if rd.Workers != s.Workers || !rd.Valid {
				continue
			}
			stroke := "#2b6cb0"
			if rd.Ratio <= 1 {
				stroke = "#a0aec0"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"><title>round %d (%s first): r %.3f</title></line>`+"\n",
				xc, y(rd.Converge.PerSec), xg, y(rd.ClientGo.PerSec), stroke, rd.Round+1, rd.First, rd.Ratio)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#2b6cb0"/><circle cx="%.1f" cy="%.1f" r="3.5" fill="#718096"/>`+"\n",
				xc, y(rd.Converge.PerSec), xg, y(rd.ClientGo.PerSec))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// workerCounts is --workers: the reconcile workers of every contender, one
// count; the drain (--phases=drain) runs at each of a comma-separated list.
type workerCounts []int

func (w *workerCounts) String() string {
	s := make([]string, len(*w))
	for i, n := range *w {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (w *workerCounts) Set(v string) error {
	var counts workerCounts
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a worker count", f)
		}
		counts = append(counts, n)
	}
	*w = counts
	return nil
}

// drainHistory is the watch history window of the drain's control plane.
// kube-apiserver keeps at least max(75 s, --request-timeout + 15 s) of
// events in its watch cache (the cache doubles its capacity while its oldest
// event is younger than that, up to 102,400 × the window's ratio to 75 s
// rounded up to a power of two): the drain's control plane is started with
// --request-timeout=5m, so that a backlog of 50,000 writes taking up to
// 315 s is still replayed from the cache rather than re-listed. Only
// requests that are not watches would wait longer before timing out.
const drainHistory = 315 * time.Second
