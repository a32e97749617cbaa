package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeStartCommands returns the shell commands of the sh code blocks
// under readme's "## Start a project", in order: one a line, without
// comments (whole lines, or a trailing " # ...") and blank lines.
func readmeStartCommands(readme string) ([]string, bool) {
	_, section, ok := strings.Cut(readme, "\n## Start a project\n")
	if !ok {
		return nil, false
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cmds []string
	for rest := section; ; {
		var block string
		if _, rest, ok = strings.Cut(rest, "```sh\n"); !ok {
			break
		}
		block, rest, _ = strings.Cut(rest, "```")
		for line := range strings.Lines(block) {
			line = strings.TrimSpace(line)
			if i := strings.Index(line, " # "); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if line != "" && !strings.HasPrefix(line, "#") {
				cmds = append(cmds, line)
			}
		}
	}
	return cmds, true
}

// TestReadmeStartCommands: the commands of the README's "Start a project"
// are exactly startCommands, the ones TestScaffoldWholePath runs on a clean
// folder (make test-scaffold), in the same order: what a reader types is
// what is tested.
func TestReadmeStartCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := readmeStartCommands(string(readme))
	if !ok {
		t.Fatal(`README.md has no "## Start a project" section`)
	}
	if !slices.Equal(got, startCommands) {
		t.Errorf("the commands of README.md's \"Start a project\" differ from startCommands, which TestScaffoldWholePath runs (path_test.go); change both:\nREADME.md:\n  %s\nstartCommands:\n  %s",
			strings.Join(got, "\n  "), strings.Join(startCommands, "\n  "))
	}
}

// readmeStartCommands reads commands from sh blocks only, whatever their
// comments, and stops at the section's end.
func TestReadmeStartCommandsParsing(t *testing.T) {
	readme := "# x\n\n## Start a project\n\nText.\n\n```sh\n# a comment\nconverge init --dir op   # trailing\n\ncd op\n```\n\n```go\nnot a command\n```\n\n```sh\nmake test\n```\n\n## Next\n\n```sh\nmake run\n```\n"
	got, ok := readmeStartCommands(readme)
	if want := []string{"converge init --dir op", "cd op", "make test"}; !ok || !slices.Equal(got, want) {
		t.Errorf("readmeStartCommands = %q, %v; want %q", got, ok, want)
	}
	if _, ok := readmeStartCommands("# x\n## Start\n"); ok {
		t.Errorf("a README without the section has start commands")
	}
}
