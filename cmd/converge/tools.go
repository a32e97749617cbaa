package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// String describes the requirement for progress lines.
func (c ConvergeDep) String() string {
	switch {
	case c.Replace != "":
		return "replaced by " + c.Replace
	case c.Version != "":
		return c.Version
	}
	return "latest (resolved by go get)"
}

// convergeDep decides how go.mod requires converge: see the package doc.
func convergeDep(replace, version string) (ConvergeDep, error) {
	if replace != "" {
		abs, err := filepath.Abs(replace)
		if err != nil {
			return ConvergeDep{}, err
		}
		b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
		if err != nil || !bytes.Contains(b, []byte("module "+convergeModule+"\n")) {
			return ConvergeDep{}, usagef("--converge-replace %s is not a converge checkout (its go.mod must declare module %s)", replace, convergeModule)
		}
		return ConvergeDep{Replace: abs}, nil
	}
	if version != "" {
		if err := module.Check(convergeModule, version); err != nil {
			return ConvergeDep{}, usagef("--converge-version %q is not a version of %s: want a semantic version such as v0.4.0 or a pseudo-version", version, convergeModule)
		}
		return ConvergeDep{Version: version}, nil
	}
	return ConvergeDep{Version: buildVersion()}, nil
}

// buildVersion is the converge version this binary was built from, or "".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return versionFrom(bi)
}

// versionFrom reads a module version from build information: the main
// module's version when it is converge at a proper version (go install
// ...@v0.4.0, or a VCS-stamped build), else a pseudo-version from the VCS
// settings of a clean checkout, else "".
func versionFrom(bi *debug.BuildInfo) string {
	if bi.Main.Path != convergeModule {
		return ""
	}
	if v := bi.Main.Version; semver.IsValid(v) && module.Check(convergeModule, v) == nil && !strings.Contains(v, "+") {
		return v
	}
	var rev, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				return "" // uncommitted changes: no version names this code
			}
		}
	}
	t, err := time.Parse(time.RFC3339, at)
	if len(rev) < 12 || err != nil {
		return ""
	}
	return module.PseudoVersion("v0", "", t, rev[:12])
}

// generate runs the tools that complete the files: go get (when converge's
// version is left to it), go mod tidy, then controller-gen as make
// manifests does.
func generate(ctx context.Context, u *ui, dir string, p Project) error {
	if p.Converge.Replace == "" && p.Converge.Version == "" && !requiresConverge(dir) {
		if err := runTool(ctx, u, dir, "go", "get", convergeModule+"@latest"); err != nil {
			return fmt.Errorf("%w\nconverge could not tell which framework version to require: pass --converge-version or --converge-replace", err)
		}
	}
	if err := runTool(ctx, u, dir, "go", "mod", "tidy"); err != nil {
		return fmt.Errorf("%w\n%sThe files are written; fix the cause and run go mod tidy, then make manifests (or rerun this converge command)", err, tidyCause(err.Error(), p.Converge))
	}
	tool := controllerGenPackage + "@" + controllerGenVersion
	// The probe fails where go run would: the first step then says why.
	build, _ := toolBuild(ctx, dir, tool)
	for i, step := range controllerGenSteps(p) {
		args := append([]string{"run", tool}, step...)
		var err error
		if i == 0 && build > 0 {
			u.printf("  %-10s controller-gen %s is built once: go run downloads its source from the Go module proxy and compiles %d packages\n"+
				"             into Go's build cache (minutes: 2-4 on a laptop, longer on a busy machine); later commands and make manifests reuse it\n", "build", controllerGenVersion, build)
			err = runToolBuilding(ctx, u, dir, build, "go", append([]string{"run", "-v", tool}, step...)...)
		} else {
			err = runTool(ctx, u, dir, "go", args...)
		}
		if err != nil {
			return fmt.Errorf("%w\nThe files are written; fix the cause and run make manifests (controller-gen %s generates the deepcopy code, CRDs and config/rbac/role.yaml)", err, controllerGenVersion)
		}
	}
	// As make manifests does last: the chart's copies of what controller-gen wrote.
	if err := runTool(ctx, u, dir, "bash", chartFilesScript); err != nil {
		return fmt.Errorf("%w\nThe files are written; fix the cause and run make manifests", err)
	}
	return nil
}

// requiresConverge reports whether dir's go.mod already requires converge.
func requiresConverge(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.Contains(b, []byte(convergeModule+" v"))
}

// runTool runs a command in dir, printing one progress line, and returns an
// error holding the end of its output if it fails.
func runTool(ctx context.Context, u *ui, dir, name string, args ...string) error {
	return runToolBuilding(ctx, u, dir, 0, name, args...)
}

// runToolBuilding is runTool for a go run -v that compiles packages
// (build of them): its progress lines count the packages compiled so far.
func runToolBuilding(ctx context.Context, u *ui, dir string, packages int, name string, args ...string) error {
	display := name + " " + strings.Join(args, " ")
	u.printf("  %-10s %s\n", "run", display)
	start := time.Now()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out buildProgress
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", display, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-ticker.C:
			so := time.Since(start).Round(time.Second)
			if packages > 0 {
				u.printf("  %-10s %s (compiled %d of %d packages, %v so far)\n", "running", display, min(out.built.Load(), int64(packages)), packages, so)
			} else {
				u.printf("  %-10s %s (%v so far)\n", "running", display, so)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s failed after %v: %w\n%s", display, time.Since(start).Round(100*time.Millisecond), err, tail(out.String(), 40))
	}
	u.printf("  %-10s %s (%v)\n", "done", display, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// progressEvery is how often runTool says a long tool is still running.
const progressEvery = 15 * time.Second

// tidyCause names what most often makes go mod tidy fail in a new
// project, when its output shows it: converge's own version cannot be
// downloaded. It returns "" otherwise; the output itself is in the error.
func tidyCause(out string, dep ConvergeDep) string {
	if dep.Replace != "" || !strings.Contains(out, convergeModule+"@") {
		return ""
	}
	return fmt.Sprintf("The cause: the go command cannot download %s at %s (not published, or not reachable through GOPROXY).\n"+
		"Rerun converge init with --converge-replace PATH (a local converge checkout) or a --converge-version that exists: it rewrites go.mod.\n", convergeModule, dep)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// guessPlural makes a lower-case plural of a kind the way Kubernetes
// guesses resource names (Order → orders, Policy → policies, Status →
// statuses). Pass --plural when it guesses wrong.
func guessPlural(kind string) string {
	lower := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return lower + "es"
	case strings.HasSuffix(lower, "y") && len(lower) > 1 && !strings.ContainsAny(lower[len(lower)-2:len(lower)-1], "aeiou"):
		return lower[:len(lower)-1] + "ies"
	}
	return lower + "s"
}

// singularOf reports whether kind looks like a plural, guessPlural of a
// singular kind, and returns that singular: Orders (Order), Policies
// (Policy), Boxes (Box). Kinds ending in ss, us or is (Address, Status,
// Analysis) are taken as singular.
func singularOf(kind string) (string, bool) {
	lower := strings.ToLower(kind)
	if !strings.HasSuffix(lower, "s") || strings.HasSuffix(lower, "ss") || strings.HasSuffix(lower, "us") || strings.HasSuffix(lower, "is") {
		return "", false
	}
	for _, cut := range []int{3, 2, 1} { // Policies, Boxes, Orders
		if len(kind) <= cut {
			continue
		}
		one := kind[:len(kind)-cut]
		if cut == 3 {
			if !strings.HasSuffix(lower, "ies") {
				continue
			}
			one += "y"
		}
		if guessPlural(one) == lower && ValidateKind(one) == nil {
			return one, true
		}
	}
	return "", false
}

// resolveConverge checks, before anything is written, that the go command
// can download the converge version dep requires, and turns "latest" into
// the version it stands for. A replace needs no download.
func resolveConverge(ctx context.Context, dep ConvergeDep) (ConvergeDep, error) {
	if dep.Replace != "" {
		return dep, nil
	}
	query := dep.Version
	if query == "" {
		query = "latest"
	}
	// Outside any module, so the folder's own go.mod (if any) plays no part.
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", convergeModule+"@"+query)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return dep, fmt.Errorf("the go command cannot download %s@%s, so the project would not build; nothing was written.\n%s\n"+
			"While converge is not published, pass --converge-replace PATH (a local converge checkout, or $CONVERGE_REPLACE); "+
			"otherwise pass a --converge-version that exists, or check GOPROXY and GOPRIVATE",
			convergeModule, query, strings.TrimSpace(string(out)))
	}
	dep.Version = strings.TrimSpace(string(out))
	return dep, nil
}

// setConvergeDep makes dir's go.mod (when there is one) require converge as
// dep says: the version, or the replace directive to a local checkout
// (added, changed or dropped). It reports whether go.mod changed. It
// rewrites a go.mod converge did not write too, which would otherwise not
// require converge at all.
func setConvergeDep(dir string, dep ConvergeDep) (bool, error) {
	path := filepath.Join(dir, "go.mod")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	mf, err := modfile.Parse(path, b, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	required := ""
	for _, r := range mf.Require {
		if r.Mod.Path == convergeModule {
			required = r.Mod.Version
		}
	}
	switch {
	case dep.Replace != "":
		if required == "" {
			err = mf.AddRequire(convergeModule, replacedVersion)
		}
		if err == nil {
			err = mf.AddReplace(convergeModule, "", dep.Replace, "")
		}
	case dep.Version != "":
		if err = mf.AddRequire(convergeModule, dep.Version); err == nil {
			err = mf.DropReplace(convergeModule, "")
		}
	default: // latest, left to go get
		err = mf.DropReplace(convergeModule, "")
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	mf.Cleanup()
	out, err := mf.Format()
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, b) {
		return false, nil
	}
	return true, writeFile(path, out, false)
}
