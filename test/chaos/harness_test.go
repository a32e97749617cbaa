package chaos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/faultproxy"
	"github.com/converge-dev/converge/internal/testenv"
)

var widgets = schema.GroupVersionResource{Group: "chaos.converge.dev", Version: "v1", Resource: "widgets"}

// suite is the control plane, proxy and controller binary the faults share.
type suite struct {
	env     *envtest.Environment
	admin   *rest.Config
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	proxy   *faultproxy.Proxy
	bin     string // chaosctl
	dir     string
	scale   scale
	mu      sync.Mutex
	results []result
}

// scale sizes the runs: `make chaos` runs the full size, `make test` a small one.
type scale struct {
	objects, updates, restarts int
	rate                       float64 // updates per second
}

func scaleFromEnv() scale {
	if os.Getenv("CHAOS_FULL") != "" {
		return scale{objects: 300, updates: 3000, restarts: 6, rate: 150}
	}
	return scale{objects: 100, updates: 600, restarts: 3, rate: 100}
}

// result is one row of the summary table.
type result struct {
	fault            string
	objects, updates int
	converged        int
	maxConvergence   time.Duration
	overlaps         int
	relists          int64
}

func (s *suite) record(r result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
}

// table renders the results as a Markdown table.
func (s *suite) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("\n| fault | objects | updates | converged | max convergence | overlaps | relists |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range s.results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %v | %d | %d |\n", r.fault, r.objects, r.updates, r.converged,
			r.maxConvergence.Round(10*time.Millisecond), r.overlaps, r.relists)
	}
	return b.String()
}

// controllerProcess is one running chaosctl.
type controllerProcess struct {
	cmd      *exec.Cmd
	stderr   *testenv.Buffer
	debug    string // host:port of /cache and /injected
	metrics  string // host:port of /metrics
	probes   string // host:port of /readyz
	exited   chan struct{}
	exitErr  error
	stopping atomic.Bool
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startController runs chaosctl with the kubeconfig and extra flags. The
// ports it is given were free a moment before; when another process took
// one meanwhile, chaosctl exits at once saying so, and it is started again
// on new ports.
func (s *suite) startController(t *testing.T, kubeconfig, namespace, trace string, extra ...string) *controllerProcess {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := s.startControllerOnce(t, kubeconfig, namespace, trace, extra...)
		if attempt == 5 || !p.lostAPort() {
			return p
		}
		t.Logf("chaosctl lost a port to another process; starting it again on new ports")
	}
}

// lostAPort waits until p serves on all its addresses (liveness, metrics
// and its debug handler answer) or exits, for at most a minute, and reports
// whether it exited because one of its addresses was taken.
func (p *controllerProcess) lostAPort() bool {
	serves := func(url string) bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return strings.Contains(p.stderr.String(), "address already in use")
		default:
		}
		if serves("http://"+p.probes+"/healthz") && serves("http://"+p.metrics+"/metrics") && serves("http://"+p.debug+"/injected") {
			return false
		}
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

func (s *suite) startControllerOnce(t *testing.T, kubeconfig, namespace, trace string, extra ...string) *controllerProcess {
	t.Helper()
	p := &controllerProcess{stderr: &testenv.Buffer{}, debug: freePort(t), metrics: freePort(t), probes: freePort(t), exited: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + namespace, "--trace=" + trace,
		"--debug-bind-address=" + p.debug, "--metrics-bind-address=" + p.metrics, "--metrics-insecure",
		"--health-probe-bind-address=" + p.probes,
	}, extra...)
	p.cmd = exec.Command(s.bin, args...)
	p.cmd.Stderr = p.stderr
	// Detect half-open connections within seconds rather than client-go's
	// default 30 + 15 s, so the suite stays short.
	p.cmd.Env = append(os.Environ(), "HTTP2_READ_IDLE_TIMEOUT_SECONDS=4", "HTTP2_PING_TIMEOUT_SECONDS=2")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if !p.stopping.Load() {
			p.stopping.Store(true)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// crashed fails t if the controller exited without being asked to.
func (p *controllerProcess) crashed(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		if !p.stopping.Load() {
			t.Fatalf("controller exited on its own (%v); its log:\n%s", p.exitErr, tail(p.stderr.String(), 40))
		}
	default:
	}
}

// stop sends SIGTERM and checks the controller drains, exits 0 and leaks
// no goroutines.
func (p *controllerProcess) stop(t *testing.T) {
	t.Helper()
	p.crashed(t)
	p.stopping.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second):
		t.Fatalf("controller did not exit within 45s of SIGTERM; its log:\n%s", tail(p.stderr.String(), 40))
	}
	if p.exitErr != nil {
		t.Errorf("controller exited with %v after SIGTERM; its log:\n%s", p.exitErr, tail(p.stderr.String(), 40))
	}
	if !strings.Contains(p.stderr.String(), "no goroutine leak") {
		t.Errorf("controller did not report a clean goroutine check; its log:\n%s", tail(p.stderr.String(), 40))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func getJSON(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

func getText(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// workload is a namespace of objects of one kind, with the update stream.
type workload struct {
	s         *suite
	gvr       schema.GroupVersionResource
	namespace string
	names     []string
	updates   atomic.Int64
}

func (s *suite) newWorkload(t *testing.T, gvr schema.GroupVersionResource, kind string, create bool) *workload {
	t.Helper()
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	ns = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, ns)
	if len(ns) > 50 {
		ns = ns[:50]
	}
	if _, err := s.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &workload{s: s, gvr: gvr, namespace: ns}
	for i := range s.scale.objects {
		w.names = append(w.names, fmt.Sprintf("obj-%03d", i))
	}
	if create {
		w.create(t, kind)
	}
	return w
}

func (w *workload) create(t *testing.T, kind string) {
	t.Helper()
	for _, n := range w.names {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": w.gvr.GroupVersion().String(), "kind": kind,
			"metadata": map[string]any{"name": n, "namespace": w.namespace},
			"spec":     map[string]any{"value": int64(0)},
		}}
		if _, err := w.s.dyn.Resource(w.gvr).Namespace(w.namespace).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// stream patches spec.value of random objects at the suite's rate until n
// updates were made or ctx ends. Failed patches (the fault may hit the API
// server itself) are retried.
func (w *workload) stream(ctx context.Context, n int) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.s.scale.rate))
	defer tick.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := w.names[rand.IntN(len(w.names))]
		patch := []byte(fmt.Sprintf(`{"spec":{"value":%d}}`, i+1))
		for ctx.Err() == nil {
			_, err := w.s.dyn.Resource(w.gvr).Namespace(w.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			if err == nil {
				w.updates.Add(1)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// converged counts objects whose status matches their spec and generation.
func (w *workload) converged(ctx context.Context) (int, error) {
	list, err := w.s.dyn.Resource(w.gvr).Namespace(w.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range list.Items {
		want, _, _ := unstructured.NestedInt64(o.Object, "spec", "value")
		have, ok, _ := unstructured.NestedInt64(o.Object, "status", "value")
		gen, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		if ok && have == want && gen == o.GetGeneration() {
			n++
		}
	}
	return n, nil
}

// awaitConvergence waits up to bound for every object to converge and
// returns how long it took.
func (w *workload) awaitConvergence(t *testing.T, p *controllerProcess, bound time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	last := 0
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		p.crashed(t)
		n, err := w.converged(ctx)
		if err != nil {
			return false, nil // the API server may still be recovering
		}
		last = n
		return n == len(w.names), nil
	})
	if err != nil {
		t.Fatalf("%d of %d objects converged within %v of the last fault; controller log:\n%s", last, len(w.names), bound, tail(p.stderr.String(), 30))
	}
	return time.Since(start), last
}

// cacheMatchesList checks the controller's cache holds exactly what a fresh
// LIST returns (same objects, same resource versions), and returns its
// relist count.
func (w *workload) cacheMatchesList(t *testing.T, p *controllerProcess) int64 {
	t.Helper()
	var got struct {
		Objects map[string]string `json:"objects"`
		Relists int64             `json:"relists"`
	}
	var diff string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := getJSON(ctx, "http://"+p.debug+"/cache", &got); err != nil {
			diff = err.Error()
			return false, nil
		}
		list, err := w.s.dyn.Resource(w.gvr).Namespace(w.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		want := map[string]string{}
		for _, o := range list.Items {
			want[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
		diff = mapDiff(want, got.Objects)
		return diff == "", nil
	})
	if err != nil {
		t.Errorf("controller cache differs from a fresh LIST: %s", diff)
	}
	return got.Relists
}

func mapDiff(want, got map[string]string) string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("%s: list %q cache %q", k, v, got[k]))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": in cache, not in list")
		}
	}
	sort.Strings(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("... %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

// overlaps reads a trace and counts reconciles of one key that overlapped,
// within one process or across processes.
func overlaps(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type span struct{ begin, end int64 }
	open := map[string]map[string]int64{} // key → pid → begin
	spans := map[string][]span{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			continue
		}
		ev, key, pid := fields[0], fields[1], fields[3]
		ts, _ := strconv.ParseInt(fields[2], 10, 64)
		if open[key] == nil {
			open[key] = map[string]int64{}
		}
		switch ev {
		case "B":
			open[key][pid] = ts
		case "E":
			spans[key] = append(spans[key], span{open[key][pid], ts})
			delete(open[key], pid)
		}
	}
	// A process killed mid-reconcile leaves begins without ends: count them
	// as running until the end of the trace.
	for key, byPid := range open {
		for _, b := range byPid {
			spans[key] = append(spans[key], span{b, 1 << 62})
		}
	}
	n := 0
	for _, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].begin < ss[j].begin })
		for i := 1; i < len(ss); i++ {
			if ss[i].begin < ss[i-1].end {
				n++
			}
		}
	}
	return n
}

func kubeconfigFor(t *testing.T, dir, name string, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(dir, name+".kubeconfig")
	if err := envtest.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}
