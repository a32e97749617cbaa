package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// A phase ends once the contender has stopped writing: when kube-apiserver's
// write counters (see requestResources) have not moved for cluster.quietFor
// (defaultQuietFor, shorter with --quick), read
// every quietPoll, at most quietMax after the phase converged. So the
// requests a contender makes after the last change it needed (the passes its
// own writes set off, a queue still draining behind a client-side rate
// limit) count to the phase that caused them, and the idle window that
// follows is idle.
const (
	defaultQuietFor = 2 * time.Second
	quietPoll       = 250 * time.Millisecond
	quietMax        = time.Minute
)

// waitQuiet reads the request counters until the writes stopped for
// c.quietFor; it returns the last reading and when the writes were last seen
// to move (since, if they never did).
func (c *cluster) waitQuiet(ctx context.Context, since time.Time) (requestCounts, time.Time, error) {
	rc, err := c.scrapeRequests(ctx)
	if err != nil {
		return rc, since, err
	}
	lastMove, deadline := since, time.Now().Add(quietMax)
	for time.Since(lastMove) < c.quietFor && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, quietPoll); err != nil {
			return rc, lastMove, err
		}
		next, err := c.scrapeRequests(ctx)
		if err != nil {
			return rc, lastMove, err
		}
		if writes(next.byVerb) != writes(rc.byVerb) {
			lastMove = time.Now()
		}
		rc = next
	}
	return rc, lastMove, nil
}

// resetParents deletes the parents workload's Apps, ConfigMaps and
// Deployments and creates the n Apps again, so that every contender run
// starts from parents without children or status. No garbage collector runs
// (there is no kube-controller-manager), so the children are deleted too.
func (c *cluster) resetParents(ctx context.Context, n, conc int) error {
	ns := namespaceFor(workload.Parents)
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=bench-app"}
	if err := again(ctx, func() error {
		return c.dyn.Resource(workload.AppGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}); err != nil {
		return fmt.Errorf("delete apps: %w", err)
	}
	if err := again(ctx, func() error { return c.cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel) }); err != nil {
		return fmt.Errorf("delete configmaps: %w", err)
	}
	if err := again(ctx, func() error {
		return c.cs.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}); err != nil {
		return fmt.Errorf("delete deployments: %w", err)
	}
	for {
		l, err := c.dyn.Resource(workload.AppGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return c.setUp(ctx, workload.Parents, n, conc)
}

// again calls f up to five times, a second apart, until it succeeds: a
// deletion of tens of thousands of objects may outlast one request (the
// server goes on deleting) or lose its stream, and is safe to repeat.
func again(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil {
			return nil
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// parentWatch is the driver's view of the parents workload, from its own
// informers on the API server: it decides when each parent reached a goal.
type parentWatch struct {
	n       int
	ns      string
	index   map[string]int // name -> parent index
	apps    cache.Indexer
	cms     cache.Indexer
	deploys cache.Indexer
	stop    context.CancelFunc

	mu    sync.Mutex
	goals []*goal
}

// goal is a condition per parent; it records when each of its parents first
// met it.
type goal struct {
	holds func(i int) bool
	want  map[int]bool // parents it is about
	met   map[int]int64
	last  int64         // unix nanos of the latest first time
	done  chan struct{} // closed once every wanted parent met it
}

func startParentWatch(ctx context.Context, c *cluster, n int) (*parentWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	ns := namespaceFor(workload.Parents)
	w := &parentWatch{n: n, ns: ns, index: make(map[string]int, n), stop: cancel}
	for i := range n {
		w.index[workload.Name(workload.Parents, i)] = i
	}
	typed := informers.NewSharedInformerFactoryWithOptions(c.cs, 0, informers.WithNamespace(ns))
	cmInf := typed.Core().V1().ConfigMaps().Informer()
	deployInf := typed.Apps().V1().Deployments().Informer()
	appInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, ns, nil).ForResource(workload.AppGVR).Informer()
	w.apps, w.cms, w.deploys = appInf.GetIndexer(), cmInf.GetIndexer(), deployInf.GetIndexer()
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			if i, ok := w.index[m.GetName()]; ok {
				w.check(i)
			}
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed}
	for _, inf := range []cache.SharedIndexInformer{cmInf, deployInf, appInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			cancel()
			return nil, err
		}
	}
	typed.Start(ctx.Done())
	go appInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), cmInf.HasSynced, deployInf.HasSynced, appInf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("driver's informers did not sync")
	}
	return w, nil
}

// app, cm and deploy return parent i and its children as the driver's
// informers show them, nil when absent.
func (w *parentWatch) app(i int) *workload.App {
	obj, ok, _ := w.apps.GetByKey(w.ns + "/" + workload.Name(workload.Parents, i))
	if !ok {
		return nil
	}
	a := &workload.App{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, a) != nil {
		return nil
	}
	return a
}

func (w *parentWatch) cm(i int) *corev1.ConfigMap {
	obj, ok, _ := w.cms.GetByKey(w.ns + "/" + workload.Name(workload.Parents, i))
	if !ok {
		return nil
	}
	return obj.(*corev1.ConfigMap)
}

func (w *parentWatch) deploy(i int) *appsv1.Deployment {
	obj, ok, _ := w.deploys.GetByKey(w.ns + "/" + workload.Name(workload.Parents, i))
	if !ok {
		return nil
	}
	return obj.(*appsv1.Deployment)
}

// cmHolds reports whether parent i's ConfigMap holds its spec.data.
func (w *parentWatch) cmHolds(i int) bool {
	a, cm := w.app(i), w.cm(i)
	return a != nil && cm != nil && cm.Data[workload.AppDataKey] == a.Spec.Data
}

// converged reports whether parent i is converged: its ConfigMap holds
// spec.data, its Deployment spec.replicas and spec.image, and its status
// was written for its generation with Ready True.
func (w *parentWatch) converged(i int) bool {
	a, cm, d := w.app(i), w.cm(i), w.deploy(i)
	if a == nil || cm == nil || d == nil || cm.Data[workload.AppDataKey] != a.Spec.Data {
		return false
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != a.Spec.Replicas {
		return false
	}
	image := ""
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == workload.AppContainer {
			image = c.Image
		}
	}
	if image != a.Spec.Image {
		return false
	}
	ready := a.ReadyCondition()
	return a.Status.ObservedGeneration == a.Generation && ready != nil && ready.Status == metav1.ConditionTrue
}

// watchFor starts a goal over parents (nil: all of them).
func (w *parentWatch) watchFor(parents []int, holds func(i int) bool) *goal {
	g := &goal{holds: holds, want: map[int]bool{}, met: map[int]int64{}, done: make(chan struct{})}
	if parents == nil {
		for i := range w.n {
			g.want[i] = true
		}
	}
	for _, i := range parents {
		g.want[i] = true
	}
	w.mu.Lock()
	w.goals = append(w.goals, g)
	w.mu.Unlock()
	for i := range g.want {
		w.check(i)
	}
	return g
}

// check evaluates every goal for parent i.
func (w *parentWatch) check(i int) {
	now := time.Now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.goals {
		if !g.want[i] {
			continue
		}
		if _, ok := g.met[i]; ok || !g.holds(i) {
			continue
		}
		g.met[i] = now
		g.last = max(g.last, now)
		if len(g.met) == len(g.want) {
			close(g.done)
		}
	}
}

// wait waits until every parent of g met it or timeout passed; it returns
// when the last one did and how many did not.
func (w *parentWatch) wait(g *goal, timeout time.Duration) (last time.Time, missed int) {
	select {
	case <-g.done:
	case <-time.After(timeout):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goals = removeGoal(w.goals, g)
	return time.Unix(0, g.last), len(g.want) - len(g.met)
}

func removeGoal(gs []*goal, g *goal) []*goal {
	out := gs[:0]
	for _, x := range gs {
		if x != g {
			out = append(out, x)
		}
	}
	return out
}

// runParents runs one contender process through the parents workload:
// start-up to every parent converged, an idle window, a rollout of new
// data to every parent, and a drift of 10% of the ConfigMaps.
func runParents(ctx context.Context, c *cluster, name, bin string, o runOpts, repeat int, res *Result) error {
	tag := fmt.Sprintf("%s-%s-%d", o.kind, name, repeat)
	if err := c.resetParents(ctx, o.n, 32); err != nil {
		return fmt.Errorf("%s: reset: %w", tag, err)
	}
	w, err := startParentWatch(ctx, c, o.n)
	if err != nil {
		return fmt.Errorf("%s: %w", tag, err)
	}
	defer w.stop()
	res.Requests = map[string]map[string]float64{}
	res.RequestsByResource = map[string]map[string]float64{}
	res.Conflicts = map[string]float64{}
	var scrapeErr error
	keep := func(err error) {
		if err != nil && scrapeErr == nil {
			scrapeErr = err
		}
	}
	scrape := func() requestCounts {
		rc, err := c.scrapeRequests(ctx)
		keep(err)
		return rc
	}
	// quiet waits for the writes to stop and returns the counters then, and
	// the seconds from start to the last write seen.
	quiet := func(start, converged time.Time) (requestCounts, float64) {
		rc, last, err := c.waitQuiet(ctx, converged)
		keep(err)
		return rc, last.Sub(start).Seconds()
	}
	record := func(phase string, before, after requestCounts, own map[string]float64) float64 {
		d, byRes, conflicts := after.sub(before, own)
		res.Requests[phase] = d
		res.RequestsByResource[phase] = byRes
		res.Conflicts[phase] = conflicts
		return writes(d)
	}

	logf, err := os.Create(filepath.Join(o.logDir, tag+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	dropFromPageCache(bin)
	cmd := exec.Command(bin, "--kind="+string(o.kind), "--kubeconfig="+o.kubeconfig, "--workers="+strconv.Itoa(o.workers))
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
	t := newTracker(nil) // only for the memory replies
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s (log: %s)", tag, fmt.Sprintf(format, args...), logf.Name())
	}

	// Start-up: process start to every parent converged.
	converged := w.watchFor(nil, w.converged)
	before := scrape()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		t.read(stdout)
		waitErr = cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case <-converged.done:
	case <-exited:
		return fail("exited during start-up: %v", waitErr)
	case <-time.After(o.deadline + 2*time.Minute):
	}
	res.SyncCPUSeconds, _ = cpuSeconds(pid)
	last, missed := w.wait(converged, 0)
	res.Missed += missed
	res.SyncSeconds = last.Sub(start).Seconds()
	after, quietAt := quiet(start, last)
	res.SyncQuietSeconds = quietAt
	res.SyncWrites = record("sync", before, after, nil)

	// Memory after sync.
	if rss, err := procStatus(pid, "VmRSS"); err == nil {
		res.RSSBytes = float64(rss)
	}
	if _, err := io.WriteString(stdin, "mem\n"); err != nil {
		return fail("ask for memory stats: %v", err)
	}
	select {
	case m := <-t.mem:
		res.HeapBytes = float64(m.heapAlloc)
	case <-time.After(30 * time.Second):
		return fail("no memory stats")
	}
	if o.profileDir != "" {
		fmt.Fprintf(stdin, "heap %s\n", filepath.Join(o.profileDir, tag+".heap.pprof"))
		select {
		case <-t.acks:
		case <-time.After(30 * time.Second):
		}
	}

	// Idle: nothing changes; every write is one too many.
	before = scrape()
	time.Sleep(o.idle)
	after = scrape()
	res.IdleSeconds = o.idle.Seconds()
	res.IdleWrites = record("idle", before, after, nil)

	// Rollout: new spec.data for every parent.
	if o.phases["rollout"] {
		const version = 1
		cmHas := w.watchFor(nil, func(i int) bool {
			cm := w.cm(i)
			return cm != nil && cm.Data[workload.AppDataKey] == workload.AppData(i, version)
		})
		done := w.watchFor(nil, func(i int) bool {
			a := w.app(i)
			return a != nil && a.Spec.Data == workload.AppData(i, version) && w.converged(i)
		})
		before = scrape()
		cpuBefore, _ := cpuSeconds(pid)
		start := time.Now()
		var errs int64
		var mu sync.Mutex
		_ = parallel(ctx, o.n, 32, func(ctx context.Context, i int) error {
			body := fmt.Appendf(nil, `{"spec":{"data":%q}}`, workload.AppData(i, version))
			if _, err := c.dyn.Resource(workload.AppGVR).Namespace(w.ns).Patch(ctx, workload.Name(workload.Parents, i), types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
			}
			return nil
		})
		res.WriteErrors += errs
		lastCM, missedCM := w.wait(cmHas, o.deadline+time.Minute)
		lastAll, missedAll := w.wait(done, o.deadline)
		res.Missed += max(missedCM, missedAll)
		res.RolloutCMSeconds = lastCM.Sub(start).Seconds()
		res.RolloutSeconds = lastAll.Sub(start).Seconds()
		after, res.RolloutQuietSeconds = quiet(start, lastAll)
		cpuAfter, _ := cpuSeconds(pid)
		res.RolloutCPU = cpuAfter - cpuBefore
		res.RolloutWrites = record("rollout", before, after, map[string]float64{"apps PATCH": float64(o.n)})
	}

	// Drift: another field manager changes the data of 10% of the ConfigMaps.
	if o.phases["drift"] {
		var drifted []int
		for i := 0; i < o.n; i += 10 {
			drifted = append(drifted, i)
		}
		var mu sync.Mutex
		driftRV := map[int]int64{}
		reverted := w.watchFor(drifted, func(i int) bool {
			mu.Lock()
			rv, ok := driftRV[i]
			mu.Unlock()
			cm := w.cm(i)
			if !ok || cm == nil {
				return false
			}
			live, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
			return live > rv && w.cmHolds(i)
		})
		before = scrape()
		start := time.Now()
		_ = parallel(ctx, len(drifted), 32, func(ctx context.Context, j int) error {
			i := drifted[j]
			body := []byte(`{"data":{"` + workload.AppDataKey + `":"changed by hand"}}`)
			cm, err := c.cs.CoreV1().ConfigMaps(w.ns).Patch(ctx, workload.Name(workload.Parents, i), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "bench-drift"})
			if err != nil {
				mu.Lock()
				res.WriteErrors++
				mu.Unlock()
				return nil
			}
			rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
			mu.Lock()
			driftRV[i] = rv
			mu.Unlock()
			w.check(i)
			return nil
		})
		last, missed := w.wait(reverted, o.deadline)
		res.Missed += missed
		res.Drifted = len(drifted)
		res.DriftSeconds = last.Sub(start).Seconds()
		after, res.DriftQuietSeconds = quiet(start, last)
		res.DriftWrites = record("drift", before, after, map[string]float64{"configmaps PATCH": float64(len(drifted))})
	}
	if scrapeErr != nil {
		return fail("read kube-apiserver metrics: %v", scrapeErr)
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
		_ = cmd.Process.Kill()
		<-exited
		res.ShutdownSeconds = time.Since(stopAt).Seconds()
	}
	return nil
}
