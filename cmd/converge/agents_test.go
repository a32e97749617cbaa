package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// madeByTools are the paths AGENTS.md names that converge does not render:
// make manifests (controller-gen, and the chart's copies) and make assets
// write them.
var madeByTools = []string{
	"api/**/zz_generated.deepcopy.go", "config/crd/bases/", "config/rbac/role.yaml",
	"config/webhook/manifests.yaml", "dist/chart/files/", "~/.cache/converge",
}

// TestAgentsFile: what AGENTS.md tells a newcomer to run or open exists in
// the project it is written into: each make target in the Makefile, each
// converge command in the CLI, and, in a project with every kind of file,
// each path among the files converge writes (a <kind> or <version>
// standing for any name) or those make manifests writes.
func TestAgentsFile(t *testing.T) {
	for name, p := range map[string]Project{"init alone": {Module: "example.com/team/op", Name: "op", Domain: "example.com"}, "every kind": goldenProject(t)} {
		t.Run(name, func(t *testing.T) {
			files, err := render(p)
			if err != nil {
				t.Fatal(err)
			}
			byPath := map[string]string{}
			var paths []string
			for _, f := range files {
				byPath[f.Path] = string(f.Content)
				paths = append(paths, f.Path)
			}
			paths = append(paths, manifestPath)
			agents, ok := byPath["AGENTS.md"]
			if !ok {
				t.Fatal("the project has no AGENTS.md")
			}
			code := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(agents, -1)
			var checked int
			for _, c := range code {
				s := c[1]
				switch {
				case strings.HasPrefix(s, "make "):
					target := strings.Fields(s)[1]
					if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(byPath["Makefile"]) {
						t.Errorf("AGENTS.md names `%s`, which the Makefile has no target for", s)
					}
				case strings.HasPrefix(s, "converge "):
					args := strings.Fields(s)[1:]
					if _, _, ok := findCommand(args); !ok && !slices.Contains([]string{"<command>", "create"}, args[0]) {
						t.Errorf("AGENTS.md names `%s`, which is no converge command", s)
					}
				case s == p.Module:
				case strings.Contains(s, "/") && !strings.Contains(s, " ") && !strings.HasPrefix(s, "+") && !strings.HasPrefix(s, "framework/") && !strings.Contains(s, "("):
					// The paths of the kinds' files are checked in the
					// project that has kinds.
					if len(p.Resources) > 0 && !slices.Contains(madeByTools, s) && !anyPathMatches(s, paths) {
						t.Errorf("AGENTS.md names the path %s, which converge does not write", s)
					}
				default:
					continue
				}
				checked++
			}
			if checked < 15 {
				t.Errorf("checked %d names of AGENTS.md, want them all read", checked)
			}
		})
	}
}

// anyPathMatches reports whether pattern (a path, a folder ending in "/",
// with <name> placeholders) names one of paths or a folder holding one.
func anyPathMatches(pattern string, paths []string) bool {
	re := regexp.QuoteMeta(pattern)
	re = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(strings.ReplaceAll(re, `\*\*`, `.*`), `[^/]+`)
	if strings.HasSuffix(pattern, "/") {
		re += ".*"
	}
	m := regexp.MustCompile("^" + re + "$")
	return slices.ContainsFunc(paths, m.MatchString)
}
