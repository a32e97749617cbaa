package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// convergeRequirement reads how dir's go.mod requires converge.
func convergeRequirement(t *testing.T, dir string) (version, replace string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range mf.Require {
		if r.Mod.Path == convergeModule {
			version = r.Mod.Version
		}
	}
	for _, r := range mf.Replace {
		if r.Old.Path == convergeModule {
			replace = r.New.Path
		}
	}
	return version, replace
}

// An init whose converge version cannot be downloaded fails before it
// writes anything, naming the flag that helps; rerun with it, it succeeds.
func TestInitUnresolvableVersionWritesNothing(t *testing.T) {
	t.Setenv("GOPROXY", "off") // nothing can be downloaded: deterministic and offline
	t.Setenv("CONVERGE_REPLACE", "")
	dir := filepath.Join(t.TempDir(), "op")
	code, _, errOut := converge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-version", "v0.1.0")
	if code != 1 || !strings.Contains(errOut, "--converge-replace") || !strings.Contains(errOut, convergeModule+"@v0.1.0") || !strings.Contains(errOut, "nothing was written") {
		t.Errorf("init with a version that cannot be downloaded: exit %d, stderr:\n%s\nwant exit 1 naming the module, the version and --converge-replace", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the failed init left %s behind (%v): %v", dir, err, snapshot(t, dir))
	}
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout, "--skip-generate")
	if _, replace := convergeRequirement(t, dir); replace != checkout {
		t.Errorf("go.mod replaces converge with %q, want %s", replace, checkout)
	}
}

// A project created with one requirement takes the flags of a re-run: go.mod
// is rewritten (the replace added, then dropped again), and the manifest
// remembers the new requirement.
func TestInitRerunAppliesConvergeFlags(t *testing.T) {
	t.Setenv("CONVERGE_REPLACE", "")
	dir := scaffoldFast(t) // --converge-version v0.1.0
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout, "--skip-generate")
	if v, replace := convergeRequirement(t, dir); replace != checkout || v != "v0.1.0" {
		t.Errorf("after a re-run with --converge-replace go.mod requires %s replaced by %q, want v0.1.0 replaced by %s\n%s", v, replace, checkout, out)
	}
	if !strings.Contains(out, "update     go.mod (converge replaced by "+checkout+")") {
		t.Errorf("the re-run did not report the go.mod change:\n%s", out)
	}
	m, _, err := loadManifest(dir)
	if err != nil || m.Project.Converge.Replace != checkout {
		t.Errorf("the manifest records converge as %+v (%v), want the replace", m.Project.Converge, err)
	}
	// Without the flag a re-run keeps the requirement.
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--skip-generate")
	if _, replace := convergeRequirement(t, dir); replace != checkout {
		t.Errorf("a re-run without flags dropped the replace")
	}
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-version", "v0.2.0", "--skip-generate")
	if v, replace := convergeRequirement(t, dir); replace != "" || v != "v0.2.0" {
		t.Errorf("after a re-run with --converge-version v0.2.0 go.mod requires %s replaced by %q, want v0.2.0 without a replace", v, replace)
	}
}

// init in a folder that already holds a module (of the same path) and a
// README: go.mod gets the converge requirement, the README is kept and
// described as the user's own file, not as one converge wrote.
func TestInitInAnExistingModule(t *testing.T) {
	t.Setenv("CONVERGE_REPLACE", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/team/op\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout, "--skip-generate")
	if v, replace := convergeRequirement(t, dir); v == "" || replace != checkout {
		t.Errorf("go.mod requires converge %q replaced by %q, want a requirement replaced by %s", v, replace, checkout)
	}
	if want := "keep       README.md: it was there before, not written by converge (--force overwrites it)"; !strings.Contains(out, want) {
		t.Errorf("init did not say %q:\n%s", want, out)
	}
	if strings.Contains(out, "README.md: changed since converge generated it") {
		t.Errorf("init described the user's README as a changed converge file:\n%s", out)
	}
}
