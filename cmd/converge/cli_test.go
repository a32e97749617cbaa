package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// converge runs the CLI in-process and returns its exit status and output.
func converge(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustConverge runs the CLI and fails the test unless it succeeds.
func mustConverge(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := converge(t, args...)
	if code != 0 {
		t.Fatalf("converge %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// scaffoldFast creates a project with a built-in controller and an API,
// without running go mod tidy or controller-gen.
func scaffoldFast(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "op")
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-version", "v0.1.0", "--skip-generate")
	mustConverge(t, "create", "controller", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--dir", dir, "--skip-generate")
	mustConverge(t, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--dir", dir, "--skip-generate")
	return dir
}

func TestRerunChangesNothing(t *testing.T) {
	dir := scaffoldFast(t)
	before := snapshot(t, dir)
	for _, args := range [][]string{
		{"init", "--module", "example.com/team/op"},
		{"create", "controller", "--group", "apps", "--version", "v1", "--kind", "Deployment"},
		{"create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Order"},
	} {
		out := mustConverge(t, append(args, "--dir", dir, "--skip-generate")...)
		if !strings.Contains(out, " 0 created, 0 updated, 0 overwritten, ") || !strings.Contains(out, " 0 kept") {
			t.Errorf("converge %s changed files on a re-run:\n%s", strings.Join(args, " "), out)
		}
	}
	after := snapshot(t, dir)
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed on a re-run", p)
		}
	}
	if len(after) != len(before) {
		t.Errorf("a re-run changed the number of files from %d to %d", len(before), len(after))
	}
}

func TestRerunKeepsUserChanges(t *testing.T) {
	dir := scaffoldFast(t)
	const edited = "internal/controller/order_controller.go"
	path := filepath.Join(dir, filepath.FromSlash(edited))
	mine := []byte("package controller\n\n// My own Order controller.\n")
	if err := os.WriteFile(path, mine, 0o644); err != nil {
		t.Fatal(err)
	}

	// A new controller rewrites the registry but leaves the edited file alone, and says so.
	out := mustConverge(t, "create", "controller", "--group", "core", "--version", "v1", "--kind", "ConfigMap", "--dir", dir, "--skip-generate")
	for _, want := range []string{
		"keep       " + edited + ": changed since converge generated it (--force overwrites it)",
		"update     internal/controller/controllers.go",
		"create     internal/controller/configmap_controller.go",
		"Kept 1 file(s) you changed: " + edited + ".",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, mine) {
		t.Fatalf("%s was overwritten without --force", edited)
	}
	registry, _ := os.ReadFile(filepath.Join(dir, "internal", "controller", "controllers.go"))
	if !bytes.Contains(registry, []byte("SetupConfigMapController,")) {
		t.Errorf("controllers.go does not list the new controller:\n%s", registry)
	}

	// It stays the user's on later runs too.
	out = mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate")
	if !strings.Contains(out, "keep       "+edited) {
		t.Errorf("a second run did not report the kept file:\n%s", out)
	}

	// --force puts the generated file back, and it is converge's again.
	out = mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate", "--force")
	if !strings.Contains(out, "overwrite  "+edited) {
		t.Errorf("--force did not report the overwrite:\n%s", out)
	}
	if b, _ := os.ReadFile(path); bytes.Equal(b, mine) || !bytes.Contains(b, []byte("func SetupOrderController(")) {
		t.Fatalf("--force did not restore %s:\n%s", edited, b)
	}
	out = mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate")
	if strings.Contains(out, "keep") {
		t.Errorf("after --force the file still counts as the user's:\n%s", out)
	}
}

// A file converge wrote and nobody changed follows the templates: a manifest
// hash that matches the file on disk lets converge update it.
func TestRerunUpdatesUntouchedFiles(t *testing.T) {
	dir := scaffoldFast(t)
	m, _, err := loadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Pretend an older converge wrote README.md differently.
	old := []byte("# op\n\nWritten by an older converge.\n")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Files["README.md"] = hash(old)
	b, _ := m.encode()
	if err := os.WriteFile(filepath.Join(dir, manifestPath), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate")
	if !strings.Contains(out, "update     README.md") {
		t.Errorf("README.md was not updated:\n%s", out)
	}
}

func TestGoModIsWrittenOnce(t *testing.T) {
	dir := scaffoldFast(t)
	gomod := filepath.Join(dir, "go.mod")
	tidied := []byte("module example.com/team/op\n\ngo 1.26.0\n// as go mod tidy left it\n")
	if err := os.WriteFile(gomod, tidied, 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate")
	if strings.Contains(out, "go.mod") {
		t.Errorf("a re-run touched go.mod:\n%s", out)
	}
	if b, _ := os.ReadFile(gomod); !bytes.Equal(b, tidied) {
		t.Errorf("go.mod was rewritten")
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{}, {"help"}, {"--help"}, {"-h"},
		{"init", "--help"}, {"init", "-h"}, {"help", "init"},
		{"create", "api", "--help"}, {"create", "controller", "--help"}, {"create", "webhook", "--help"}, {"version", "--help"},
		{"create"}, {"create", "--help"}, {"help", "create"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := converge(t, args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !strings.Contains(out, "Usage:") {
				t.Fatalf("no usage:\n%s", out)
			}
		})
	}
	_, out, _ := converge(t, "create")
	for _, sub := range []string{"create api", "create controller", "create webhook"} {
		if !strings.Contains(out, sub) {
			t.Errorf("converge create does not list %s:\n%s", sub, out)
		}
	}
	_, out, _ = converge(t, "create", "api", "--help")
	for _, flag := range []string{"--group", "--version", "--kind", "--plural", "--namespaced", "--dir", "--force", "--skip-generate", "Example"} {
		if !strings.Contains(out, flag) {
			t.Errorf("create api --help does not mention %s:\n%s", flag, out)
		}
	}
	_, out, _ = converge(t, "create", "webhook", "--help")
	for _, flag := range []string{"--group", "--version", "--kind", "--defaulting", "--validation", "--conversion", "--spoke", "Example:"} {
		if !strings.Contains(out, flag) {
			t.Errorf("create webhook --help does not mention %s:\n%s", flag, out)
		}
	}
}

// Bad command lines exit 2 with a message saying what is allowed, and write
// nothing.
func TestCommandLineErrors(t *testing.T) {
	project := scaffoldFast(t)
	empty := t.TempDir()
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "go.mod"), []byte("module example.com/theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"unknown command", []string{"frobnicate"}, `converge: unknown command "frobnicate"`, 2},
		{"mistyped command", []string{"int", "--module", "x"}, "converge: unknown command \"int\"\nDid you mean \"converge init\"?", 2},
		{"mistyped group", []string{"creat", "api"}, "Did you mean \"converge create api\"?", 2},
		{"mistyped subcommand", []string{"create", "apii"}, "converge: unknown command \"create apii\"\nDid you mean \"converge create api\"?", 2},
		{"unknown flag", []string{"init", "--modul", "x"}, "converge init: flag provided but not defined: --modul\nDid you mean --module?", 2},
		{"flag without value", []string{"init", "--module"}, "converge init: flag needs an argument: --module", 2},
		{"kubebuilder's flag", []string{"create", "webhook", "--programmatic-validation"}, "converge create webhook has no --programmatic-validation; use --validation", 2},
		{"positional", []string{"init", "--module", "example.com/op", "extra"}, `converge init: unexpected argument "extra"`, 2},
		{"no module", []string{"init", "--dir", empty}, "converge init: --module is required: a module path is like", 2},
		{"bad module", []string{"init", "--module", "op", "--dir", empty}, `converge init: module path "op" is invalid: missing dot in first path element`, 2},
		{"module the go command cannot build", []string{"init", "--module", "github.com/foo/-bar", "--dir", empty}, `converge init: module path "github.com/foo/-bar" is invalid: its last element "-bar" starts with '-'`, 2},
		{"bad domain", []string{"init", "--module", "example.com/op", "--domain", "local", "--dir", empty}, `converge init: domain "local" is invalid`, 2},
		{"bad replace", []string{"init", "--module", "example.com/op", "--converge-replace", empty, "--dir", empty}, "is not a converge checkout", 2},
		{"bad converge version", []string{"init", "--module", "example.com/op", "--converge-version", "latest", "--dir", empty}, `--converge-version "latest" is not a version`, 2},
		{"other module", []string{"init", "--module", "example.com/other", "--dir", project}, "already holds a converge project with --module example.com/team/op (not example.com/other)", 1},
		{"foreign go.mod", []string{"init", "--module", "example.com/op", "--dir", foreign}, `declares module "example.com/theirs", not example.com/op`, 1},
		{"not a project", []string{"create", "api", "--group", "shop", "--version", "v1", "--kind", "Order", "--dir", empty}, "is not a converge project (it has no .converge/scaffold.json): run converge init first", 1},
		{"bad kind", []string{"create", "api", "--group", "shop", "--version", "v1", "--kind", "order", "--dir", project}, `kind "order" does not start with an upper-case letter`, 2},
		{"bad version", []string{"create", "api", "--group", "shop", "--version", "1", "--kind", "Order", "--dir", project}, `version "1" is invalid`, 2},
		{"built-in group for an API", []string{"create", "api", "--group", "apps", "--version", "v1", "--kind", "Order", "--dir", project}, `group "apps" is a built-in Kubernetes API group`, 2},
		{"no group for a controller", []string{"create", "controller", "--version", "v1", "--kind", "Pod", "--dir", project}, "--group is required: the kind's API group", 2},
		{"unknown built-in kind", []string{"create", "controller", "--group", "apps", "--version", "v1", "--kind", "Deploymnt", "--dir", project}, `apps/v1 has no kind "Deploymnt"; its kinds are: ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet`, 2},
		{"group folder taken", []string{"create", "api", "--group", "shop.acme.io", "--version", "v1", "--kind", "Cart", "--dir", project}, "group shop.acme.io would share the folder api/shop with group shop.example.com", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectRefused(t, project, empty, tc.args, tc.want, tc.code)
		})
	}
}

// expectRefused runs converge with args and expects it to exit with code,
// write want to stderr (and a --help hint for a usage error), nothing to
// stdout, and nothing into project or empty.
func expectRefused(t *testing.T, project, empty string, args []string, want string, code int) {
	t.Helper()
	before := snapshot(t, project)
	gotCode, out, errOut := converge(t, args...)
	if gotCode != code {
		t.Errorf("exit %d, want %d", gotCode, code)
	}
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr:\n%s\nwant it to contain\n%s", errOut, want)
	}
	if code == 2 && !strings.Contains(errOut, "--help") {
		t.Errorf("a usage error should point to --help:\n%s", errOut)
	}
	if out != "" {
		t.Errorf("stdout on an error: %q", out)
	}
	after := snapshot(t, project)
	if len(after) != len(before) {
		t.Errorf("a failed command wrote files")
	}
	for p, b := range before {
		if after[p] != b {
			t.Errorf("a failed command changed %s", p)
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a failed command wrote into an empty folder")
	}
}

// The advice after a second version of a kind is the README's and create
// webhook --help's: the newest version is the hub, the others its spokes.
func TestSecondVersionAdvisesTheNewestAsHub(t *testing.T) {
	dir := scaffoldFast(t) // Order v1alpha1
	out := mustConverge(t, "create", "api", "--group", "shop", "--version", "v1", "--kind", "Order", "--dir", dir, "--skip-generate")
	if want := "converge create webhook --group shop.example.com --version v1 --kind Order --conversion --spoke v1alpha1"; !strings.Contains(out, want) {
		t.Errorf("create api of a second version does not advise %q:\n%s", want, out)
	}
}

// A kind that looks plural is created as asked, with a warning that names
// the resource it gets and the singular kind; --plural, or a singular kind,
// gets none.
func TestCreateAPIWarnsOfAPluralKind(t *testing.T) {
	dir := scaffoldFast(t)
	out := mustConverge(t, "create", "api", "--group", "shop", "--version", "v1alpha1", "--kind", "Items", "--dir", dir, "--skip-generate")
	if want := "  warning    kind Items looks plural: a kind names one object (Item), and its resource is the plural, here itemses (kubectl get itemses).\n" +
		"             If Items is one object, go on (--plural sets the resource); if not, delete what this command wrote and create --kind Item.\n"; !strings.Contains(out, want) {
		t.Errorf("create api --kind Items printed:\n%s\nwant the warning\n%s", out, want)
	}
	for _, args := range [][]string{
		{"--kind", "News", "--plural", "news"},
		{"--kind", "Status"},
		{"--kind", "Order"},
	} {
		out := mustConverge(t, append([]string{"create", "api", "--group", "shop", "--version", "v1alpha1", "--dir", dir, "--skip-generate"}, args...)...)
		if strings.Contains(out, "warning") {
			t.Errorf("create api %s warned:\n%s", strings.Join(args, " "), out)
		}
	}
}
