package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
)

// Without --url, explain asks the manager whose URL make run wrote to
// bin/metrics-url, from the project's root or a folder below it; a file
// left by a make run that ended is named in the error.
func TestExplainFindsALocalMakeRun(t *testing.T) {
	converged := introspect.KeyStatus{
		Controller: "order", Kind: introspect.Kind{Group: "shop.example.com", Version: "v1alpha1", Kind: "Order"}, Namespace: "default", Name: "order-sample",
		ControllerState: "running", Cached: true, Informer: informers.InformerStats{Synced: true},
		History: []introspect.ReconcileRecord{{Started: time.Now().Add(-time.Second), Result: "success", Reason: "change"}},
	}
	url := debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{converged}}, false)
	project := t.TempDir()
	writeTestFiles(t, project, map[string]string{
		"go.mod":                   "module example.com/team/op\n",
		metricsURLFile:             url + "\n",
		"internal/controller/x.go": "package controller\n",
	})
	for name, dir := range map[string]string{"the project's root": project, "a folder below": filepath.Join(project, "internal", "controller")} {
		t.Run(name, func(t *testing.T) {
			t.Chdir(dir)
			code, out, errOut := converge(t, "explain", "Order", "default/order-sample")
			if code != 0 || !strings.Contains(out, "Order default/order-sample in controller order:\n  converged: last reconciled") {
				t.Errorf("exit %d, want 0 and the object converged:\n%s%s", code, out, errOut)
			}
		})
	}

	// A make run that ended without removing its file (killed): the
	// error says where the URL came from.
	writeTestFiles(t, project, map[string]string{metricsURLFile: "http://127.0.0.1:1\n"})
	t.Chdir(project)
	code, _, errOut := converge(t, "explain", "Order", "default/order-sample", "--timeout", "5s")
	if code != exitUnreachable || !strings.Contains(errOut, "the URL is from "+filepath.Join(project, "bin", "metrics-url")+", which make run writes while it runs") {
		t.Errorf("a stale bin/metrics-url: exit %d, want %d naming the file:\n%s", code, exitUnreachable, errOut)
	}
	writeTestFiles(t, project, map[string]string{metricsURLFile: "localhost:8080\n"})
	if code, _, errOut := converge(t, "explain", "Order", "default/order-sample"); code != 1 || !strings.Contains(errOut, `bin/metrics-url holds "localhost:8080", not an http or https URL`) {
		t.Errorf("a bin/metrics-url without a scheme: exit %d:\n%s", code, errOut)
	}

	// Outside a project, or in one without a make run: the port-forward's URL.
	for _, dir := range []string{t.TempDir(), func() string {
		d := t.TempDir()
		writeTestFiles(t, d, map[string]string{"go.mod": "module example.com/other\n"})
		return d
	}()} {
		t.Chdir(dir)
		if got, from := localRunURL(); got != defaultExplainURL || from != "" {
			t.Errorf("in %s: localRunURL = %q from %q, want %s", dir, got, from, defaultExplainURL)
		}
	}
}

// writeTestFiles writes files (slash-separated paths relative to dir).
func writeTestFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
