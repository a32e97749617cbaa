package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/framework/envtest"
)

// TestScaffoldCI is the promise that a new project's CI is green on its
// first push, whichever command made it: on one project, grown as a new
// user grows it (init alone, then create api, create controller, create
// webhook with defaulting and validation, a second version with a
// conversion webhook), the project's own make lint (golangci-lint, built
// from the Go module proxy once and cached by go run) finds nothing, and
// every run step of its CI workflow passes; its Helm chart renders what
// make deploy applies (checkChart). On the project of init alone, make
// lint-fix fixes what it can.
//
// go test runs the lint of init alone and after create api (a few
// minutes, the first lint building golangci-lint); with
// CONVERGE_TEST_WHOLE_PATH=1 (make test-scaffold) it grows the project to
// the end and runs every CI step (make lint, make test) at each stage.
func TestScaffoldCI(t *testing.T) {
	checkout, dir := projectToBuild(t)
	whole := os.Getenv("CONVERGE_TEST_WHOLE_PATH") != ""
	step := stepTimer(t)
	for _, stage := range []struct {
		name     string
		commands [][]string
		// quick stages run in go test too, with make lint only.
		quick bool
	}{
		{"init", [][]string{{"init", "--module", "example.com/team/op", "--converge-replace", checkout}}, true},
		{"create api", [][]string{{"create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Order"}}, true},
		{"create controller", [][]string{{"create", "controller", "--group", "apps", "--version", "v1", "--kind", "Deployment"}}, false},
		{"create webhook --defaulting --validation", [][]string{{"create", "webhook", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--defaulting", "--validation"}}, false},
		{"create webhook --conversion", [][]string{
			{"create", "api", "--group", "shop", "--version", "v1", "--kind", "Order"},
			{"create", "webhook", "--group", "shop", "--version", "v1", "--kind", "Order", "--conversion", "--spoke", "v1alpha1"},
		}, false},
	} {
		if !stage.quick && !whole {
			t.Logf("the stages from %q on run with CONVERGE_TEST_WHOLE_PATH=1 (make test-scaffold)", stage.name)
			break
		}
		step("converge "+stage.name, func() {
			for _, c := range stage.commands {
				out := mustConverge(t, append(c, "--dir", dir)...)
				// init built controller-gen (go run keeps it): no later
				// command announces a build.
				if stage.name != "init" && strings.Contains(out, "is built once") {
					t.Errorf("converge %s announces a build of controller-gen, which init built:\n%s", strings.Join(c, " "), out)
				}
			}
		})
		if stage.name == "init" {
			step("make lint-fix", func() { lintFix(t, dir) })
		}
		steps := ciSteps(t, dir)
		if !whole {
			steps = []string{"make lint"}
		}
		for _, s := range steps {
			step(stage.name+": "+s, func() {
				out, err := shell(t.Context(), dir, nil, s)
				if err != nil {
					t.Fatalf("after converge %s, the CI step %q fails: %v\n%s", stage.name, s, err, tail(out, 80))
				}
				if s == "make lint" && !strings.Contains(out, "0 issues.") {
					t.Errorf("after converge %s, make lint did not report 0 issues:\n%s", stage.name, tail(out, 40))
				}
			})
		}
		last := stage.name == "create webhook --conversion"
		step(stage.name+": the Helm chart", func() {
			var env *envtest.Environment
			if last {
				env = startControlPlane(t)
			}
			checkChart(t, dir, env)
		})
	}
}

// lintFix writes a file that gofmt and goimports would change into the
// project: make lint-fix rewrites it as they would, and make lint then
// finds nothing in it. The file is removed afterwards.
func lintFix(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "internal", "controller", "lintfix.go")
	const messy = "package controller\n\nimport (\n\t\"strings\"\n\t\"fmt\"\n)\n\nfunc   greeting( name string ) string {\nreturn fmt.Sprintf(\"hello, %s\", strings.ToUpper(name))\n}\n\nvar _ = greeting\n"
	const tidy = "package controller\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\nfunc greeting(name string) string {\n\treturn fmt.Sprintf(\"hello, %s\", strings.ToUpper(name))\n}\n\nvar _ = greeting\n"
	if err := os.WriteFile(path, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
	}()
	if out, err := shell(t.Context(), dir, nil, "make lint-fix"); err != nil {
		t.Fatalf("make lint-fix: %v\n%s", err, tail(out, 40))
	}
	if got, _ := os.ReadFile(path); string(got) != tidy {
		t.Errorf("make lint-fix left\n%s\nwant\n%s", got, tidy)
	}
}

// workflow is the part of a GitHub Actions workflow that ciSteps reads.
type workflow struct {
	Jobs map[string]struct {
		Steps []struct {
			Uses string `json:"uses"`
			Run  string `json:"run"`
		} `json:"steps"`
	} `json:"jobs"`
}

// ciSetupActions are the actions the generated workflow may use: they set
// up the runner (the code, Go, the cache of the control-plane binaries)
// and have no counterpart here, where all three are at hand.
var ciSetupActions = []string{"actions/checkout", "actions/setup-go", "actions/cache"}

// ciSteps returns the run steps of the project's workflows, in order; it
// fails the test on a step that is neither a run step nor a set-up action,
// which this test would otherwise silently skip.
func ciSteps(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the project has no workflow in .github/workflows (%v)", err)
	}
	var steps []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var w workflow
		if err := yaml.Unmarshal(b, &w); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		jobs := make([]string, 0, len(w.Jobs))
		for name := range w.Jobs {
			jobs = append(jobs, name)
		}
		slices.Sort(jobs)
		for _, job := range jobs {
			for _, s := range w.Jobs[job].Steps {
				action, _, _ := strings.Cut(s.Uses, "@")
				switch {
				case s.Run != "":
					steps = append(steps, strings.TrimSpace(s.Run))
				case !slices.Contains(ciSetupActions, action):
					t.Fatalf("%s: job %s uses %s, which this test cannot run: run it here, or add it to ciSetupActions if it only sets up the runner", f, job, s.Uses)
				}
			}
		}
	}
	return steps
}

// The generated workflow lints first, then tests: what TestScaffoldCI runs.
func TestCISteps(t *testing.T) {
	dir := scaffoldFast(t)
	if got, want := ciSteps(t, dir), []string{"make lint", "make test", "make test-e2e"}; !slices.Equal(got, want) {
		t.Errorf("ciSteps = %q, want %q", got, want)
	}
}
