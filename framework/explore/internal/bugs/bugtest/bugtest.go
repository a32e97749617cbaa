// Package bugtest runs the explorer on the ported bugs: a buggy version
// must be caught within the default budget, a fixed one must pass it
// a quick count of schedules in go test (QuickSchedules), or
// EXPLORE_SCHEDULES when set (make explore sets 1000).
package bugtest

import (
	"os"
	"strconv"
	"testing"

	"github.com/converge-dev/converge/framework/explore"
)

// Caught fails t unless the explorer finds a schedule of opts breaking
// the property named broken within the default budget; it logs the report.
func Caught(t *testing.T, opts explore.Options, broken string) *explore.Failure {
	t.Helper()
	f, err := explore.Check(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatalf("the explorer did not catch the bug in %d schedules", explore.DefaultSchedules)
	}
	if f.Broken != broken {
		t.Fatalf("the explorer caught %q, want %q:\n%s", f.Broken, broken, f)
	}
	if f.Schedule == 0 {
		t.Fatalf("the fault-free schedule breaks it: the scenario is wrong:\n%s", f)
	}
	t.Logf("caught:\n%s", f)
	return f
}

// QuickSchedules is the fixed versions' budget in go test.
const QuickSchedules = 40

// Passes fails t if a schedule of opts breaks a property; the budget is
// EXPLORE_SCHEDULES schedules when set, else QuickSchedules.
func Passes(t *testing.T, opts explore.Options) {
	t.Helper()
	opts.Schedules = QuickSchedules
	if n, err := strconv.Atoi(os.Getenv("EXPLORE_SCHEDULES")); err == nil && n > 0 {
		opts.Schedules = n
	}
	f, err := explore.Check(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Fatalf("the fixed version fails:\n%s", f)
	}
}
