package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/envtest"
)

// TestScaffoldBuildsAndPasses is the promise of converge init: a project
// scaffolded here, with a replace pointing at this checkout, builds, vets and
// passes its own specs on a real control plane (the binaries make assets
// builds) and its unit tests on framework/fake. It adds a controller for
// every built-in kind converge has a sample for, so each sample is checked
// by the API server, a kind without a sample, two kinds of a new API, a
// cluster-scoped kind and the same kind (Order) in a second group.
//
// It takes about a minute with a warm build cache (mostly linking and the
// generated specs); go test -short skips it.
func TestScaffoldBuildsAndPasses(t *testing.T) {
	checkout, dir := projectToBuild(t)
	step := stepTimer(t)

	step("converge init", func() {
		mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout)
	})
	step("converge create controller (Deployment)", func() {
		mustConverge(t, "create", "controller", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--dir", dir)
	})
	step("converge create controller (other kinds)", func() {
		keys := make([]string, 0, len(samples)+1)
		for k := range samples {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range append(keys, "storage.k8s.io/v1/StorageClass") { // the last has no sample
			group, rest, _ := strings.Cut(k, "/")
			version, kind, _ := strings.Cut(rest, "/")
			if kind == "Deployment" {
				continue
			}
			mustConverge(t, "create", "controller", "--group", group, "--version", version, "--kind", kind, "--dir", dir, "--skip-generate")
		}
	})
	step("converge create api (Customer)", func() {
		mustConverge(t, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Customer", "--dir", dir, "--skip-generate")
	})
	// sales's Order comes first: shop's, created next, has the controller ShopOrder.
	step("converge create api (Tenant, cluster-scoped; sales's Order)", func() {
		mustConverge(t, "create", "api", "--group", "tenancy", "--version", "v1alpha1", "--kind", "Tenant", "--namespaced=false", "--dir", dir, "--skip-generate")
		mustConverge(t, "create", "api", "--group", "sales", "--version", "v1alpha1", "--kind", "Order", "--dir", dir, "--skip-generate")
	})
	step("converge create api (Order)", func() {
		out := mustConverge(t, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--dir", dir)
		for _, want := range []string{"run        go mod tidy", "controller-gen@" + controllerGenVersion + " object", "Next steps:", "make test"} {
			if !strings.Contains(out, want) {
				t.Errorf("create api output lacks %q:\n%s", want, out)
			}
		}
	})
	for _, f := range []string{
		"api/shop/v1alpha1/zz_generated.deepcopy.go",
		"config/crd/bases/shop.example.com_orders.yaml",
		"config/crd/bases/shop.example.com_customers.yaml",
		"config/rbac/role.yaml",
		"go.sum",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("controller-gen or go mod tidy did not produce %s: %v", f, err)
		}
	}
	role, _ := os.ReadFile(filepath.Join(dir, "config", "rbac", "role.yaml"))
	for _, want := range []string{"- orders/status", "- configmaps", "- deployments", "- events"} {
		if !strings.Contains(string(role), want) {
			t.Errorf("config/rbac/role.yaml lacks %q:\n%s", want, role)
		}
	}

	step("go build ./...", func() { goCmd(t, dir, "build", "./...") })
	step("go vet ./...", func() { goCmd(t, dir, "vet", "./...") })
	step("run with --cluster-secrets-namespace (engages a kubeconfig Secret's cluster)", func() { runWithClusterSecrets(t, dir) })
	step("go test -race ./... (generated specs)", func() {
		out := goCmd(t, dir, "test", "-race", "-count=1", "-v", "./...")
		if !strings.Contains(out, "ok  \texample.com/team/op/internal/controller") {
			t.Errorf("the generated specs did not run:\n%s", out)
		}
		// The unit tests on framework/fake: every controller's passed, but
		// that of the kind without a sample, which is skipped.
		want := []string{"--- PASS: TestCustomerControllerOnFakeAPIServer", "--- PASS: TestOrderControllerOnFakeAPIServer", "--- SKIP: TestStorageClassControllerOnFakeAPIServer",
			"--- PASS: TestTenantControllerOnFakeAPIServer", "--- PASS: TestShopOrderControllerOnFakeAPIServer"}
		for k := range samples {
			want = append(want, "--- PASS: Test"+k[strings.LastIndex(k, "/")+1:]+"ControllerOnFakeAPIServer")
		}
		var missing []string
		for _, test := range want {
			if !strings.Contains(out, test) {
				missing = append(missing, test)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("the generated output lacks %q:\n%s", missing, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if line = ansi.ReplaceAllString(line, ""); strings.Contains(line, "Ran ") || strings.Contains(line, "Passed") {
				t.Log(strings.TrimSpace(line))
			}
		}
	})

	step("kubectl apply -k config/default (restricted pod security)", func() { applyConfig(t, dir) })

	// Re-running with the same arguments changes nothing and runs no tool.
	step("converge create api (again)", func() {
		out := mustConverge(t, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--dir", dir)
		if !strings.Contains(out, " 0 created, 0 updated, 0 overwritten, ") || strings.Contains(out, "go mod tidy") {
			t.Errorf("a re-run changed something:\n%s", out)
		}
	})
}

// stepTimer returns a function that runs a named step and logs its time.
func stepTimer(t *testing.T) func(name string, f func()) {
	return func(name string, f func()) {
		t.Helper()
		start := time.Now()
		f()
		t.Logf("%-60s %v", name, time.Since(start).Round(100*time.Millisecond))
	}
}

// projectToBuild skips the test under go test -short; otherwise it returns
// this checkout (for --converge-replace) and a folder for a project that
// the go command may resolve modules for.
func projectToBuild(t *testing.T) (checkout, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("scaffolds a project and runs its tests on a real control plane: about a minute")
	}
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	return checkout, filepath.Join(t.TempDir(), "op")
}

// applyConfig deploys config/default (kustomized by kubectl) to a fresh
// control plane: the API server must accept every object, and the
// namespace's restricted Pod Security Standard must have nothing to say
// about the Deployment's pod template.
func applyConfig(t *testing.T, dir string) {
	t.Helper()
	kubectl, err := envtest.FindBinary("kubectl", "")
	if err != nil {
		t.Fatal(err)
	}
	env := startControlPlane(t)
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", env.KubeconfigPath(), "apply", "--server-side", "-k", "config/default")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/default: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "PodSecurity") || strings.Contains(strings.ToLower(string(out)), "warning") {
		t.Errorf("kubectl apply -k config/default warned:\n%s", out)
	}
	for _, want := range []string{"namespace/op-system serverside-applied", "deployment.apps/op-controller-manager serverside-applied", "clusterrole.rbac.authorization.k8s.io/op-manager-role serverside-applied"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl apply -k config/default did not report %q:\n%s", want, out)
		}
	}
	debugReader(t, dir, kubectl, env.KubeconfigPath())
}

// debugReader runs the README's commands that give a service account the
// project's debug-reader ClusterRole, and checks what it may then get: the
// debug page and its API, not /metrics.
func debugReader(t *testing.T, dir, kubectl, kubeconfig string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		"kubectl -n op-system create serviceaccount op-debugger",
		"kubectl create clusterrolebinding op-debugger --clusterrole=op-debug-reader --serviceaccount=op-system:op-debugger",
	} {
		if !strings.Contains(string(readme), "\n"+c+"\n") {
			t.Errorf("the project's README lacks the line %q", c)
		}
		args := append([]string{"--kubeconfig", kubeconfig}, strings.Fields(c)[1:]...)
		if out, err := exec.CommandContext(t.Context(), kubectl, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	for path, want := range map[string]string{"/debug/converge/": "yes", "/debug/converge/api/object": "yes", "/metrics": "no"} {
		out, _ := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kubeconfig, "auth", "can-i", "get", path, "--as=system:serviceaccount:op-system:op-debugger").CombinedOutput()
		// "yes", or "no" and maybe a reason.
		if got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); got != want {
			t.Errorf("may op-debugger get %s? %q, want %q", path, got, want)
		}
	}
}

// startControlPlane starts a control plane that the test's end stops.
func startControlPlane(t *testing.T) *envtest.Environment {
	t.Helper()
	env := envtest.New(envtest.Options{})
	if _, err := env.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// ansi matches the colour codes of Ginkgo's output.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// goCmd runs the go command in dir and returns its output; it fails the
// test if the command fails.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 150))
	}
	return string(out)
}

// TestScaffoldWebhooksBuildAndPass is the promise of converge create
// webhook: a project with two versions of a kind and every kind of webhook
// builds, vets and passes its specs, which run the webhooks on a real
// control plane (defaulting, validation, conversion between the versions),
// on a cluster-scoped kind and on a built-in one (Pod) too.
// go test -short skips it.
func TestScaffoldWebhooksBuildAndPass(t *testing.T) {
	checkout, dir := projectToBuild(t)
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout, "--skip-generate")
	for _, args := range [][]string{
		{"api", "--version", "v1alpha1", "--kind", "Order"},
		{"api", "--version", "v1", "--kind", "Order"},
		{"api", "--version", "v1alpha1", "--kind", "Customer"},
		{"api", "--version", "v1alpha1", "--kind", "Widget"},
		{"webhook", "--version", "v1", "--kind", "Order", "--defaulting", "--validation", "--conversion", "--spoke", "v1alpha1"},
		{"webhook", "--version", "v1alpha1", "--kind", "Customer", "--validation"},
		{"webhook", "--version", "v1alpha1", "--kind", "Widget", "--defaulting"},
		{"api", "--version", "v1alpha1", "--kind", "Tenant", "--namespaced=false"},
		{"webhook", "--version", "v1alpha1", "--kind", "Tenant", "--defaulting", "--validation"},
		{"webhook", "--group", "core", "--version", "v1", "--kind", "Pod", "--defaulting", "--validation"},
	} {
		mustConverge(t, append([]string{"create", args[0], "--group", "shop", "--dir", dir, "--skip-generate"}, args[1:]...)...)
	}
	out := mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir) // go mod tidy and controller-gen
	if !strings.Contains(out, " webhook paths=./... ") {
		t.Errorf("controller-gen did not generate the webhook configurations:\n%s", out)
	}
	manifests, err := os.ReadFile(filepath.Join(dir, "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"path: /mutate--v1-pod", "path: /validate-shop-example-com-v1alpha1-tenant", "path: /mutate-shop-example-com-v1-order", "path: /validate-shop-example-com-v1-order", "path: /validate-shop-example-com-v1alpha1-customer", "path: /mutate-shop-example-com-v1alpha1-widget"} {
		if !strings.Contains(string(manifests), want) {
			t.Errorf("config/webhook/manifests.yaml lacks %q:\n%s", want, manifests)
		}
	}
	goCmd(t, dir, "build", "./...")
	goCmd(t, dir, "vet", "./...")
	out = goCmd(t, dir, "test", "-race", "-count=1", "-v", "./internal/controller/", "-ginkgo.v")
	out = ansi.ReplaceAllString(out, "")
	for want, n := range map[string]int{
		"defaults an empty message, and keeps one that is set":                             3, // Order v1, Widget v1alpha1, Tenant v1alpha1 (cluster-scoped)
		"rejects a message that is too long, saying why":                                   3, // Order v1, Customer v1alpha1, Tenant v1alpha1
		"defaults the message annotation, and keeps one that is set":                       1, // core Pod
		"rejects a message annotation that is too long, saying why":                        1, // core Pod
		"rejects an empty message":                                                         1, // Customer: Order's is defaulted
		"reads at v1 the Order written at v1alpha1, and at v1alpha1 the one written at v1": 1,
		"converts through the CRD's conversion webhook":                                    1,
	} {
		if strings.Count(out, want) < n {
			t.Errorf("the generated specs did not run %q %d times:\n%s", want, n, tail(out, 80))
		}
	}
}
