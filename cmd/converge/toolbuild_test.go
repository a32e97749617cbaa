package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tool that go run has not built yet needs its packages compiled, and
// the run that builds it says how many it compiled; once built, the probe
// finds nothing to compile. The tool comes from a module proxy in a
// folder, with a source no earlier run can have cached.
func TestToolBuildProbe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tool with go run")
	}
	const tool = "example.com/probe/cmd/probe@v1.0.0"
	proxy := t.TempDir()
	stamp := fmt.Sprint(time.Now().UnixNano())
	writeModule(t, proxy, "example.com/probe", "v1.0.0", map[string]string{
		"go.mod":            "module example.com/probe\n\ngo 1.24\n",
		"cmd/probe/main.go": "package main\n\nimport \"example.com/probe/say\"\n\nfunc main() { say.It() }\n",
		"say/say.go":        "package say\n\nimport \"fmt\"\n\n// It prints a stamp unique to this test run.\nfunc It() { fmt.Println(\"" + stamp + "\") }\n",
	})
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw")
	dir := t.TempDir()

	n, err := toolBuild(t.Context(), dir, tool)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("toolBuild of a tool never built = %d packages, want its 2 at least", n)
	}
	var out bytes.Buffer
	u := &ui{out: &out}
	if err := runToolBuilding(t.Context(), u, dir, n, "go", "run", "-v", tool); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "done       go run -v "+tool) {
		t.Errorf("runToolBuilding printed:\n%s", out.String())
	}
	if n, err := toolBuild(t.Context(), dir, tool); err != nil || n != 0 {
		t.Errorf("toolBuild of a tool go run has built = %d, %v; want 0", n, err)
	}
}

// buildProgress counts the import paths go run -v prints, whatever the
// writes' boundaries, and keeps the whole output.
func TestBuildProgressCountsPackages(t *testing.T) {
	const out = "go: downloading example.com/probe v1.0.0\nexample.com/probe/say\nexample.com/probe/cmd/probe\ngopkg.in/yaml.v3\nhello, world: not a package\n"
	for _, size := range []int{1, 3, 7, len(out)} {
		var b buildProgress
		for i := 0; i < len(out); i += size {
			if _, err := b.Write([]byte(out[i:min(i+size, len(out))])); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.built.Load(); got != 3 {
			t.Errorf("writes of %d bytes: counted %d packages, want 3", size, got)
		}
		if b.String() != out {
			t.Errorf("writes of %d bytes: kept %q", size, b.String())
		}
	}
	n := countBuiltPackages([]byte("mkdir -p $WORK/b001/\n#\n# example.com/probe/say\n#\n\ncat >/tmp/x << 'EOF'\n#\n# example.com/probe/cmd/probe\n#\n"))
	if n != 2 {
		t.Errorf("countBuiltPackages = %d, want 2", n)
	}
	if n := countBuiltPackages([]byte("/root/.cache/go-build/70/70f3-d/probe --version\n")); n != 0 {
		t.Errorf("countBuiltPackages of a cached tool's line = %d, want 0", n)
	}
}

// writeModule writes version of module (its files) into a GOPROXY folder.
func writeModule(t *testing.T, proxy, module, version string, files map[string]string) {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	for name, content := range files {
		w, err := zw.Create(module + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		version + ".mod":  []byte(files["go.mod"]),
		version + ".zip":  z.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
