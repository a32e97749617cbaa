package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/envtest"
)

// startCommands are the commands of the README's "Start a project", run in
// order from the folder that gets the project (TestReadmeStartCommands keeps
// the two identical). "cd op" enters the project; make run runs until the
// test interrupts it, and the kubectl and converge explain lines run while
// it does, as a user runs them in a second terminal.
var startCommands = []string{
	"converge init --module example.com/team/op --dir op",
	"cd op",
	"converge create api --group shop --version v1alpha1 --kind Order",
	"converge create controller --group apps --version v1 --kind Deployment",
	"converge create webhook --group shop --version v1alpha1 --kind Order --defaulting --validation",
	"make test",
	"make run",
	"kubectl --kubeconfig bin/kubeconfig apply -k config/samples",
	"converge explain Order default/order-sample",
	"make build-installer IMG=registry.example.com/op:v0.1.0",
}

// whileMakeRun reports whether a start command runs while make run runs,
// in a second terminal.
func whileMakeRun(c string) bool {
	return strings.HasPrefix(c, "kubectl ") || strings.HasPrefix(c, "converge explain ")
}

// TestScaffoldWholePath is a new user's path, on a clean folder, with the
// README's commands: a first init that cannot resolve converge (writes
// nothing, names --converge-replace), the init repaired with it
// ($CONVERGE_REPLACE), an API, a controller of a built-in kind, webhooks,
// the project's make test, make run on an embedded control plane (the
// sample reconciled, Ctrl-C ends the manager with status 0), make deploy
// refusing a cluster without cert-manager before applying anything, and
// make build-installer writing one install.yaml that the API server accepts
// in a server-side dry run.
//
// It takes several minutes (two builds of the project and its race-enabled
// specs); it runs with CONVERGE_TEST_WHOLE_PATH=1, as make test-scaffold does.
func TestScaffoldWholePath(t *testing.T) {
	if os.Getenv("CONVERGE_TEST_WHOLE_PATH") == "" {
		t.Skip("set CONVERGE_TEST_WHOLE_PATH=1 (make test-scaffold): several minutes")
	}
	checkout, dir := projectToBuild(t)
	parent := filepath.Dir(dir)
	kubectl, err := envtest.FindBinary("kubectl", "")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(bin, "converge"), "./cmd/converge")
	build.Dir = checkout
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/converge: %v\n%s", err, out)
	}
	// The commands find converge and kubectl on PATH, and no kubeconfig:
	// make run then starts an embedded control plane.
	t.Setenv("PATH", bin+string(os.PathListSeparator)+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	t.Setenv("CONVERGE_ASSETS", filepath.Dir(kubectl))
	// The probe port of a local run is any free one: other runs may hold :8081.
	t.Setenv("ARGS", "--health-probe-bind-address=127.0.0.1:0")
	// So is the metrics port: another make run may be trying :8080 at the
	// same moment.
	t.Setenv("METRICS_ADDRESS", "127.0.0.1:0")

	step := stepTimer(t)
	step("converge init (converge cannot be downloaded)", func() {
		out, err := shell(t.Context(), parent, []string{"CONVERGE_REPLACE=", "GOPROXY=off"}, startCommands[0])
		if err == nil || !strings.Contains(out, "--converge-replace") || !strings.Contains(out, "nothing was written") {
			t.Fatalf("%s without a way to get converge: %v, want a failure naming --converge-replace:\n%s", startCommands[0], err, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the failed init wrote %s", dir)
		}
	})
	t.Setenv("CONVERGE_REPLACE", checkout)
	cwd := parent
	for i, c := range startCommands {
		switch {
		case c == "cd op":
			cwd = dir
		case c == "make run":
			var during []string
			for _, d := range startCommands[i+1:] {
				if !whileMakeRun(d) {
					break
				}
				during = append(during, d)
			}
			step(c, func() { makeRun(t, cwd, during) })
		case whileMakeRun(c):
			// Run by makeRun, while make run runs.
		default:
			step(c, func() {
				out, err := shell(t.Context(), cwd, nil, c)
				if err != nil {
					t.Fatalf("%s: %v\n%s", c, err, tail(out, 150))
				}
				if c == "make test" && !strings.Contains(out, "ok  \texample.com/team/op/internal/controller") {
					t.Errorf("make test did not run the specs:\n%s", tail(out, 60))
				}
			})
		}
	}

	step("make run CONTROLLER_MANAGER=true", func() { makeRunGarbageCollects(t, dir) })

	env := startControlPlane(t)
	k := func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", env.KubeconfigPath()}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Setenv("KUBECONFIG", env.KubeconfigPath())
	step("make deploy (no cert-manager)", func() {
		out, err := shell(t.Context(), dir, nil, "make deploy IMG=registry.example.com/op:v0.1.0")
		if err == nil || !strings.Contains(out, "nothing applied: the cluster has no cert-manager") {
			t.Errorf("make deploy on a cluster without cert-manager: %v, want a refusal naming cert-manager:\n%s", err, out)
		}
		if out, err := k("get", "namespace", "op-system"); err == nil {
			t.Errorf("make deploy refused, yet applied the namespace:\n%s", out)
		}
	})
	step("kubectl apply --dry-run=server -f dist/install.yaml", func() {
		install, err := os.ReadFile(filepath.Join(dir, "dist", "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"kind: CustomResourceDefinition", "kind: Deployment", "image: registry.example.com/op:v0.1.0", "kind: ValidatingWebhookConfiguration", "kind: Certificate"} {
			if !bytes.Contains(install, []byte(want)) {
				t.Errorf("dist/install.yaml lacks %q", want)
			}
		}
		// The namespace must exist for a dry run of what goes in it, and
		// cert-manager's kinds must be known: stand-ins of its CRDs.
		crds, err := filepath.Abs(filepath.Join("testdata", "certmanager", "crds.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{crds}}); err != nil {
			t.Fatal(err)
		}
		if out, err := k("create", "namespace", "op-system"); err != nil {
			t.Fatalf("kubectl create namespace: %v\n%s", err, out)
		}
		out, err := k("apply", "--server-side", "--dry-run=server", "-f", "dist/install.yaml")
		if err != nil {
			t.Fatalf("kubectl apply --dry-run=server -f dist/install.yaml: %v\n%s", err, out)
		}
		for _, want := range []string{"deployment.apps/op-controller-manager serverside-applied (server dry run)", "customresourcedefinition.apiextensions.k8s.io/orders.shop.example.com serverside-applied (server dry run)"} {
			if !strings.Contains(out, want) {
				t.Errorf("the dry run did not report %q:\n%s", want, out)
			}
		}
	})
}

// shell runs a command line with bash in dir, with extra environment
// variables, and returns its combined output.
func shell(ctx context.Context, dir string, env []string, line string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runningMake is a make run started by startMakeRun.
type runningMake struct {
	t   *testing.T
	cmd *exec.Cmd
	// exited receives make's exit once.
	exited chan error
	// scanned is closed once all of make's output is read.
	scanned     chan struct{}
	mu          sync.Mutex
	out         strings.Builder
	interrupted bool
}

// startMakeRun runs make run with args in dir as a terminal would (its own
// process group) and returns once the embedded control plane is ready; the
// test's cleanup kills what is still running.
func startMakeRun(t *testing.T, dir string, args ...string) *runningMake {
	t.Helper()
	r := &runningMake{t: t, cmd: exec.Command("make", append([]string{"run"}, args...)...), exited: make(chan error, 1), scanned: make(chan struct{})}
	r.cmd.Dir = dir
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(r.scanned)
		s := bufio.NewScanner(pr)
		once := sync.OnceFunc(func() { close(ready) })
		for s.Scan() {
			r.mu.Lock()
			fmt.Fprintln(&r.out, s.Text())
			r.mu.Unlock()
			if strings.Contains(s.Text(), "embedded control plane ready") {
				once()
			}
		}
	}()
	go func() {
		err := r.cmd.Wait()
		pw.Close()
		r.exited <- err
	}()
	t.Cleanup(func() {
		if !r.interrupted {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.exited
		}
	})
	select {
	case <-ready:
	case err := <-r.exited:
		r.interrupted = true
		t.Fatalf("make run exited before the control plane was ready: %v\n%s", err, tail(r.output(), 80))
	case <-t.Context().Done():
		t.Fatalf("make run: the control plane was not ready before the test's deadline:\n%s", tail(r.output(), 80))
	}
	return r
}

// output returns what make run printed so far.
func (r *runningMake) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// pause waits d, failing the test if make run exits meanwhile.
func (r *runningMake) pause(d time.Duration) {
	r.t.Helper()
	select {
	case <-time.After(d):
	case err := <-r.exited:
		r.interrupted = true
		r.t.Fatalf("make run exited early: %v\n%s", err, tail(r.output(), 80))
	}
}

// interrupt sends SIGINT to make run's process group, as Ctrl-C does, and
// returns all it printed once it ended. The manager must exit with status
// 0, make must report no error, and the files make run wrote for kubectl
// and converge explain must be gone.
func (r *runningMake) interrupt(dir string) string {
	r.t.Helper()
	r.interrupted = true
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
		r.t.Fatalf("make run did not end within 2 minutes of SIGINT:\n%s", tail(r.output(), 80))
	}
	<-r.scanned
	got := r.output()
	// make itself dies of the SIGINT it got from the "terminal", as it does
	// for any interrupted recipe; what must be clean is the manager's exit
	// and make's silence about an error.
	if !strings.Contains(got, "make run: bin/op exited with status 0") {
		r.t.Errorf("the manager did not exit with status 0 on SIGINT:\n%s", tail(got, 60))
	}
	if strings.Contains(got, "Error ") || strings.Contains(got, "*** [") {
		r.t.Errorf("make reported an error after Ctrl-C:\n%s", tail(got, 60))
	}
	for _, f := range []string{"kubeconfig", "metrics-url"} {
		if _, err := os.Stat(filepath.Join(dir, "bin", f)); !os.IsNotExist(err) {
			r.t.Errorf("make run left bin/%s behind", f)
		}
	}
	return got
}

// makeRun runs make run in dir (startMakeRun), applies the samples with
// during's kubectl line once the embedded control plane is up, waits until
// the sample Order is Ready and its ConfigMap exists, opens the debug page
// at the URL make run printed, runs during's converge explain line until it
// says the sample is converged, then interrupts it. make run says it runs
// no kube-controller-manager, and how to get one.
func makeRun(t *testing.T, dir string, during []string) {
	t.Helper()
	r := startMakeRun(t, dir)
	output := r.output
	if !strings.Contains(output(), "without kube-controller-manager: a deleted object's owned objects are not garbage-collected; make run CONTROLLER_MANAGER=true starts one") {
		t.Errorf("make run did not say it runs no kube-controller-manager:\n%s", tail(output(), 20))
	}
	var apply, explain string
	for _, d := range during {
		if strings.HasPrefix(d, "kubectl ") {
			apply = d
		} else {
			explain = d
		}
	}
	if apply == "" || explain == "" {
		t.Fatalf("the commands run while make run runs are %q: want a kubectl apply and a converge explain", during)
	}
	if out, err := shell(t.Context(), dir, nil, apply); err != nil {
		t.Fatalf("%s: %v\n%s", apply, err, out)
	}
	// The controller reconciles the sample: Ready, and its ConfigMap there.
	get := `kubectl --kubeconfig bin/kubeconfig get order order-sample -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' && kubectl --kubeconfig bin/kubeconfig get configmap order-sample -o name`
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := shell(t.Context(), dir, nil, get)
		if err == nil && strings.HasPrefix(got, "True") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample Order was not reconciled within 2 minutes (%v: %s):\n%s", err, got, tail(output(), 80))
		}
		r.pause(200 * time.Millisecond)
	}
	// The debug page, at the URL make run printed once it answered.
	announced := regexp.MustCompile(`make run: the debug page: (http://127\.0\.0\.1:[0-9]+/debug/converge/) `)
	deadline = time.Now().Add(2 * time.Minute)
	var page []string
	for page == nil {
		if page = announced.FindStringSubmatch(output()); page != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("make run did not print the debug page's URL within 2 minutes:\n%s", tail(output(), 80))
		}
		r.pause(100 * time.Millisecond)
	}
	res, err := http.Get(page[1])
	if err != nil {
		t.Fatalf("the debug page at %s: %v", page[1], err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "order") {
		t.Errorf("the debug page at %s: %s, want 200 naming the order controller:\n%s", page[1], res.Status, tail(string(body), 20))
	}
	// The Grafana dashboard queries metrics this manager serves.
	metrics, err := http.Get(strings.TrimSuffix(page[1], "/debug/converge/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(metrics.Body)
	_ = metrics.Body.Close()
	dashboard, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(dashboardPath)))
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(string(body))
	for _, name := range metricNames(dashboardQueries(t, dashboard)) {
		if !exported[name] {
			t.Errorf("the dashboard queries %s, which make run's manager does not serve", name)
		}
	}
	// converge explain finds the manager by itself (bin/metrics-url); the
	// sample may still be queued by its own status write for a moment.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		got, err := shell(t.Context(), dir, nil, explain)
		if err == nil && strings.Contains(got, "Order default/order-sample in controller order:\n  converged: ") {
			t.Logf("%s:\n%s", explain, got)
			break
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(filepath.Join(dir, "bin"))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("%s did not say converged within 2 minutes (%v):\n%s\nbin/ holds %q; make run's output:\n%s", explain, err, got, names, tail(output(), 40))
		}
		r.pause(200 * time.Millisecond)
	}
	r.interrupt(dir)
}

// makeRunGarbageCollects runs make run CONTROLLER_MANAGER=true in dir, which
// starts kube-controller-manager too: the sample Order's ConfigMap is
// deleted with the Order by the garbage collector.
func makeRunGarbageCollects(t *testing.T, dir string) {
	t.Helper()
	r := startMakeRun(t, dir, "CONTROLLER_MANAGER=true")
	if !strings.Contains(r.output(), "make run: with kube-controller-manager (CONTROLLER_MANAGER=true)") {
		t.Errorf("make run CONTROLLER_MANAGER=true did not say it runs kube-controller-manager:\n%s", tail(r.output(), 20))
	}
	k := "kubectl --kubeconfig bin/kubeconfig "
	if out, err := shell(t.Context(), dir, nil, k+"apply -k config/samples"); err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s", err, out)
	}
	until := func(what, line string, done func(out string, err error) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, err := shell(t.Context(), dir, nil, line)
			if done(out, err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 2 minutes (%s: %v: %s):\n%s", what, line, err, out, tail(r.output(), 60))
			}
			r.pause(200 * time.Millisecond)
		}
	}
	until("the sample Order's ConfigMap", k+"get configmap order-sample -o name", func(_ string, err error) bool { return err == nil })
	if out, err := shell(t.Context(), dir, nil, k+"delete order order-sample --wait=false"); err != nil {
		t.Fatalf("kubectl delete order order-sample: %v\n%s", err, out)
	}
	until("the garbage collector deletes the ConfigMap of the deleted Order", k+"get configmap order-sample -o name", func(out string, err error) bool {
		return err != nil && strings.Contains(out, "NotFound")
	})
	r.interrupt(dir)
}
