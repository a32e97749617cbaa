package report

import (
	"os"
	"path/filepath"
	"testing"
)

// "cpuprofile <path>" starts a profile of the window the driver chooses and
// "cpuprofile" ends it, answering the file; a second start while one runs,
// and a stop with none running, answer "-".
func TestWindowProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.cpu.pprof")
	if got := windowProfile([]string{path}); got != path {
		t.Fatalf("start: %q, want %q", got, path)
	}
	if got := windowProfile([]string{path + ".2"}); got != "-" {
		t.Errorf("a second start while one runs: %q, want -", got)
	}
	if got := windowProfile(nil); got != path {
		t.Errorf("stop: %q, want %q", got, path)
	}
	if got := windowProfile(nil); got != "-" {
		t.Errorf("stop with none running: %q, want -", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("the profile: %v, %v; want a non-empty file", fi, err)
	}
}
