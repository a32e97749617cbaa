package explore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/noretry"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/staledelete"
)

// Each kind of fault really happens: a property only that kind can break
// breaks when schedules draw it, and holds when they draw every other
// kind (the negative control).
func TestEachFaultBreaksWhatOnlyItCanBreak(t *testing.T) {
	onlyFirstManagerWrites := explore.Invariant{Name: "only manager-1 writes", Check: func(_ context.Context, s *explore.Snapshot) error {
		for _, w := range s.Writes() {
			if w.Manager != "" && w.Manager != "manager-1" {
				return fmt.Errorf("%s wrote: %s", w.Manager, w)
			}
		}
		return nil
	}}
	crashOnly := noretry.Options(noretry.Fixed)
	crashOnly.Invariants = []explore.Invariant{onlyFirstManagerWrites}

	for _, tc := range []struct {
		name   string
		opts   explore.Options
		kind   explore.FaultKind
		broken string
	}{
		// A restarted manager (manager-2) writes only after a crash.
		{"crash", crashOnly, explore.Crash, "only manager-1 writes"},
		// The swallowed status error stays only if the write failed.
		{"conflict", noretry.Options(noretry.Buggy), explore.Conflict, "status.observedGeneration is the generation"},
		{"server error", noretry.Options(noretry.Buggy), explore.ServerError, "status.observedGeneration is the generation"},
		// The backup is deleted only when the DB's creation is not yet seen.
		{"lag", staledelete.Options(staledelete.Buggy), explore.Lag, "deletes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := tc.opts
			with.Faults.Kinds = []explore.FaultKind{tc.kind}
			f, err := explore.Check(t.Context(), with)
			if err != nil {
				t.Fatal(err)
			}
			if f == nil || f.Broken != tc.broken {
				t.Fatalf("with %v faults: got %v, want %q broken", tc.kind, f, tc.broken)
			}
			for _, i := range f.Shrunk {
				if k := f.Plan[i-1].Kind; k != tc.kind {
					t.Errorf("the shrunk plan holds a %v", k)
				}
			}

			without := tc.opts
			without.Schedules = 15
			without.Faults.Kinds = nil
			for _, k := range []explore.FaultKind{explore.Conflict, explore.ServerError, explore.Crash, explore.Lag} {
				if k != tc.kind && !(tc.kind == explore.Conflict && k == explore.ServerError) && !(tc.kind == explore.ServerError && k == explore.Conflict) {
					without.Faults.Kinds = append(without.Faults.Kinds, k)
				}
			}
			if f, err := explore.Check(t.Context(), without); err != nil || f != nil {
				t.Fatalf("with %v faults: got %v, %v; want nothing broken", without.Faults.Kinds, f, err)
			}
		})
	}
}

// Without faults, schedules break nothing: the bugs need them.
func TestFaultFreeSchedulesBreakNothing(t *testing.T) {
	opts := staledelete.Options(staledelete.Buggy)
	opts.Faults.Max = -1
	opts.Schedules = 20
	if f, err := explore.Check(t.Context(), opts); err != nil || f != nil {
		t.Fatalf("got %v, %v; want nothing broken", f, err)
	}
}
