package framework

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAssignIsBalancedAndDeterministic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 32, 40} {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("member-%d", i)
		}
		owners := assign(32, members)
		load := map[string]int{}
		for b, o := range owners {
			if o == "" {
				t.Fatalf("%d members: bucket %d has no owner", n, b)
			}
			load[o]++
		}
		limit := (32 + n - 1) / n
		for m, l := range load {
			if l > limit {
				t.Errorf("%d members: %s owns %d buckets, more than ceil(32/%d) = %d", n, m, l, n, limit)
			}
		}
		if again := assign(32, members); fmt.Sprint(again) != fmt.Sprint(owners) {
			t.Errorf("%d members: assignment changed between two calls", n)
		}
	}
	if owners := assign(4, nil); owners[0] != "" {
		t.Errorf("no members: bucket 0 owned by %q", owners[0])
	}
}

func TestAssignMovesFewBucketsWhenAMemberJoins(t *testing.T) {
	before := assign(32, []string{"a", "b"})
	after := assign(32, []string{"a", "b", "c"})
	toNew, between := 0, 0
	for b := range before {
		switch {
		case before[b] == after[b]:
		case after[b] == "c":
			toNew++
		default:
			between++ // moved by the load limit
		}
	}
	// c takes its share, 10 or 11 buckets; keeping loads within
	// ceil(32/3) may move a couple between a and b, not more.
	if toNew < 10 || toNew > 11 || between > 2 {
		t.Errorf("a third member joining moved %d buckets to it and %d between the others; want 10 or 11 and at most 2", toNew, between)
	}
}

func TestFenceRefusesBucketsNotHeldOrNotRenewed(t *testing.T) {
	r := &ring{opts: ShardingOptions{Ring: "r", Namespace: "ns", RenewDeadline: time.Second}, held: map[int]*heldBucket{}}
	if err := r.check(3); !errors.Is(err, ErrBucketNotHeld) || !strings.Contains(err.Error(), "bucket 3 of ring ns/r") {
		t.Errorf("check of a bucket never held = %v, want ErrBucketNotHeld naming it", err)
	}
	r.held[3] = &heldBucket{renewed: time.Now()}
	if err := r.check(3); err != nil {
		t.Errorf("check of a bucket renewed now = %v", err)
	}
	r.held[3].renewed = time.Now().Add(-2 * time.Second)
	if err := r.check(3); !errors.Is(err, ErrBucketNotHeld) || !strings.Contains(err.Error(), "last renewed") {
		t.Errorf("check of a bucket renewed 2 s ago with a 1 s RenewDeadline = %v, want ErrBucketNotHeld", err)
	}
}
