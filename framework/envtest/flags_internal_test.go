package envtest

import (
	"slices"
	"testing"
)

// An internal test: mergeFlags is how APIServerFlags and EtcdFlags override the
// Environment's flags, which the integration tests observe only in part.
func TestMergeFlags(t *testing.T) {
	tests := []struct {
		name                string
		defaults, overrides []string
		want                []string
	}{
		{name: "none", defaults: []string{"--a=1", "--b=2"}, want: []string{"--a=1", "--b=2"}},
		{name: "override in place", defaults: []string{"--a=1", "--b=2", "--c=3"}, overrides: []string{"--b=9"}, want: []string{"--a=1", "--b=9", "--c=3"}},
		{name: "append new", defaults: []string{"--a=1"}, overrides: []string{"--v=4", "--flag"}, want: []string{"--a=1", "--v=4", "--flag"}},
		{name: "repeated default replaced once", defaults: []string{"--x=1", "--a=1", "--x=2"}, overrides: []string{"--x=3", "--x=4"}, want: []string{"--x=3", "--x=4", "--a=1"}},
		{name: "boolean without value", defaults: []string{"--watch-cache=true"}, overrides: []string{"--watch-cache=false"}, want: []string{"--watch-cache=false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeFlags(tc.defaults, tc.overrides); !slices.Equal(got, tc.want) {
				t.Errorf("mergeFlags(%q, %q) = %q, want %q", tc.defaults, tc.overrides, got, tc.want)
			}
		})
	}
}
