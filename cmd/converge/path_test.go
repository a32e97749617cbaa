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

// makeRun runs make run in dir as a terminal would (its own process
// group), applies the samples with during's kubectl line once the embedded
// control plane is up, waits until the sample Order is Ready and its
// ConfigMap exists, opens the debug page at the URL make run printed, runs
// during's converge explain line until it says the sample is converged,
// then sends SIGINT to the group, as Ctrl-C does. The manager must exit
// with status 0, make must report no error, and the files make run wrote
// for kubectl and converge explain must be gone.
func makeRun(t *testing.T, dir string, during []string) {
	t.Helper()
	cmd := exec.Command("make", "run")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	ready := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		s := bufio.NewScanner(pr)
		once := sync.OnceFunc(func() { close(ready) })
		for s.Scan() {
			mu.Lock()
			fmt.Fprintln(&out, s.Text())
			mu.Unlock()
			if strings.Contains(s.Text(), "embedded control plane ready") {
				once()
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
	interrupted := false
	defer func() {
		if !interrupted {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	select {
	case <-ready:
	case err := <-exited:
		interrupted = true
		t.Fatalf("make run exited before the control plane was ready: %v\n%s", err, tail(output(), 80))
	case <-t.Context().Done():
		t.Fatalf("make run: the control plane was not ready before the test's deadline:\n%s", tail(output(), 80))
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
		select {
		case <-time.After(200 * time.Millisecond):
		case err := <-exited:
			interrupted = true
			t.Fatalf("make run exited early: %v\n%s", err, tail(output(), 80))
		}
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
		select {
		case <-time.After(100 * time.Millisecond):
		case err := <-exited:
			interrupted = true
			t.Fatalf("make run exited early: %v\n%s", err, tail(output(), 80))
		}
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
		select {
		case <-time.After(200 * time.Millisecond):
		case err := <-exited:
			interrupted = true
			t.Fatalf("make run exited early: %v\n%s", err, tail(output(), 80))
		}
	}
	interrupted = true
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("make run did not end within 2 minutes of SIGINT:\n%s", tail(output(), 80))
	}
	<-scanned
	got := output()
	// make itself dies of the SIGINT it got from the "terminal", as it does
	// for any interrupted recipe; what must be clean is the manager's exit
	// and make's silence about an error.
	if !strings.Contains(got, "make run: bin/op exited with status 0") {
		t.Errorf("the manager did not exit with status 0 on SIGINT:\n%s", tail(got, 60))
	}
	if strings.Contains(got, "Error ") || strings.Contains(got, "*** [") {
		t.Errorf("make reported an error after Ctrl-C:\n%s", tail(got, 60))
	}
	for _, f := range []string{"kubeconfig", "metrics-url"} {
		if _, err := os.Stat(filepath.Join(dir, "bin", f)); !os.IsNotExist(err) {
			t.Errorf("make run left bin/%s behind", f)
		}
	}
}
