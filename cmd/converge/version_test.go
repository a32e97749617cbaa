package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// go.mod requires the converge version the binary was built from: see the
// package doc for the order.
func TestVersionFrom(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name     string
		path     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install @version", convergeModule, "v0.4.0", nil, "v0.4.0"},
		{"VCS-stamped pseudo-version", convergeModule, "v0.4.1-0.20260101120000-0123456789ab", nil, "v0.4.1-0.20260101120000-0123456789ab"},
		{"dirty VCS stamp", convergeModule, "v0.4.1-0.20260101120000-0123456789ab+dirty", vcs(rev, "2026-01-01T12:00:00Z", "true"), ""},
		{"devel with clean VCS settings", convergeModule, "(devel)", vcs(rev, "2026-01-01T12:00:00Z", "false"), "v0.0.0-20260101120000-0123456789ab"},
		{"devel with local changes", convergeModule, "(devel)", vcs(rev, "2026-01-01T12:00:00Z", "true"), ""},
		{"devel without VCS settings", convergeModule, "(devel)", nil, ""},
		{"another main module", "example.com/other", "v1.0.0", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: tc.path, Version: tc.version}, Settings: tc.settings}
			if got := versionFrom(bi); got != tc.want {
				t.Fatalf("versionFrom = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConvergeDep(t *testing.T) {
	dep, err := convergeDep("", "v0.3.0")
	if err != nil || dep != (ConvergeDep{Version: "v0.3.0"}) {
		t.Fatalf("convergeDep(version) = %+v, %v", dep, err)
	}
	dep, err = convergeDep("../..", "v0.3.0")
	if err != nil || dep.Replace == "" || dep.Version != "" {
		t.Fatalf("convergeDep(replace) = %+v, %v; the replace wins over the version", dep, err)
	}
	for _, bad := range []string{"latest", "0.3.0", "v2.0.0"} { // v2 would need the module path .../v2
		if _, err := convergeDep("", bad); err == nil {
			t.Errorf("convergeDep(%q) accepted it", bad)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	out := mustConverge(t, "version")
	if !strings.HasPrefix(out, "converge ") {
		t.Fatalf("converge version printed %q", out)
	}
}
