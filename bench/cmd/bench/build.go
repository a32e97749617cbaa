package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// buildContenders builds the contenders names in one go build, into a
// folder of the user's cache for this checkout of the bench: a contender
// whose binary there is up to date is not linked again. They are built as
// the Dockerfile converge scaffolds builds a manager (CGO_ENABLED=0,
// -trimpath, -ldflags=-s): statically, so no process maps the C library.
// It returns the binaries by contender.
func buildContenders(ctx context.Context, names []string) (map[string]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "converge-bench", fmt.Sprintf("%016x", fnv64(wd)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"build", "-trimpath", "-ldflags=-s", "-o", dir + string(filepath.Separator)}
	bins := map[string]string{}
	for _, n := range names {
		if !slices.Contains(args, contenderPkg[n]) { // converge-compact is the converge program
			args = append(args, contenderPkg[n])
		}
		bins[n] = filepath.Join(dir, filepath.Base(contenderPkg[n]))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build the contenders: %w", err)
	}
	return bins, nil
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
