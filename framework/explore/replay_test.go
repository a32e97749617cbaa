package explore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/tlscreate"
)

// A seed replays its fault plan: two explorations from one seed find the
// same schedule, plan and shrunk faults, and hit the same writes.
func TestASeedReplaysTheSameFaults(t *testing.T) {
	opts := tlscreate.Options(tlscreate.Buggy)
	opts.Seed = 42
	var got []*explore.Failure
	for range 2 {
		f, err := explore.Check(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			t.Fatal("not caught")
		}
		got = append(got, f)
	}
	a, b := got[0], got[1]
	if a.Seed != b.Seed || a.Schedule != b.Schedule || fmt.Sprint(a.Plan) != fmt.Sprint(b.Plan) || !slices.Equal(a.Shrunk, b.Shrunk) || fmt.Sprint(a.Hit) != fmt.Sprint(b.Hit) {
		t.Fatalf("two runs of seed 42 differ:\n%s\n%s", a, b)
	}
	t.Logf("both runs:\n%s", a)
}
