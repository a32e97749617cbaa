package main

import (
	"os"
	"strings"
	"testing"
)

// The README's "Many clusters" shows this program's controller: the code
// block after its link to examples/fleet is in main.go, line for line (one
// tab deeper), so the code readers copy is the code the e2e suite runs.
func TestREADMEShowsTheController(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "[examples/fleet](examples/fleet) copies")
	if !ok {
		t.Fatal("README does not link examples/fleet")
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("README has no go code block after its link to examples/fleet")
	}
	code, _, _ = strings.Cut(code, "```\n")
	lines := strings.Split(strings.TrimSuffix(code, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "\t" + l
	}
	if want := strings.Join(lines, "\n") + "\n"; !strings.Contains(string(main), want) {
		t.Errorf("README's examples/fleet code is not in examples/fleet/main.go; copy it over:\n%s", want)
	}
}
