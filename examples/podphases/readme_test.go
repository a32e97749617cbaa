package main

import (
	"os"
	"strings"
	"testing"
)

// The README's "A complete controller" is this package's main.go, byte for
// byte, so the code readers copy is the code the e2e suite runs.
func TestREADMEShowsMain(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## A complete controller")
	if !ok {
		t.Fatal(`README has no "## A complete controller" section`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal(`README's "A complete controller" has no go code block`)
	}
	code, _, _ = strings.Cut(code, "```\n")
	if code != string(main) {
		t.Errorf("README's \"A complete controller\" differs from examples/podphases/main.go; copy one onto the other")
	}
}
