package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
)

// toolBuild returns how many packages go run must compile before it can
// run tool (a package@version) in dir: 0 when Go's build cache holds the
// tool's executable, as it does after the first run (go run caches the
// executables it links). It asks go run -n, which prints the commands it
// would run without running them.
func toolBuild(ctx context.Context, dir, tool string) (int, error) {
	cmd := exec.CommandContext(ctx, "go", "run", "-n", tool)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("go run -n %s: %w\n%s", tool, err, tail(string(out), 20))
	}
	return countBuiltPackages(out), nil
}

// builtPackageHeader matches the line naming a package in go build -n's
// output: "#", "# path/of/package", "#".
var builtPackageHeader = regexp.MustCompile(`(?m)^# [^ \n]+$`)

// countBuiltPackages counts the packages a go build -n (or go run -n)
// output compiles.
func countBuiltPackages(out []byte) int {
	return len(builtPackageHeader.FindAll(out, -1))
}

// buildProgress is the output of a go run -v: it keeps every byte, and
// counts the lines naming a compiled package (the lines -v adds).
type buildProgress struct {
	// out is written by one goroutine at a time (exec.Cmd's copy of the
	// output) and read once the command has exited.
	out     bytes.Buffer
	partial []byte
	// built is read by the progress ticker while the command runs.
	built atomic.Int64
}

// importPathLine matches a line of go build -v: an import path alone.
var importPathLine = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)

func (b *buildProgress) Write(p []byte) (int, error) {
	b.out.Write(p)
	b.partial = append(b.partial, p...)
	last := bytes.LastIndexByte(b.partial, '\n')
	if last < 0 {
		return len(p), nil
	}
	s := bufio.NewScanner(bytes.NewReader(b.partial[:last+1]))
	for s.Scan() {
		if importPathLine.MatchString(strings.TrimSpace(s.Text())) {
			b.built.Add(1)
		}
	}
	b.partial = append(b.partial[:0], b.partial[last+1:]...)
	return len(p), nil
}

func (b *buildProgress) String() string { return b.out.String() }
