package explore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/stalestatus"
)

// A step that fails while the controllers lag behind the step before is
// applied again once the held events are released and the controllers are
// quiet; if that try fails too, it gets one more after 20 times the quiet
// period. With lag@s0 the controllers do not see the DB created in step 0,
// so the StatefulSet that step 1 rolls out does not exist yet: step 1 fails
// with NotFound, then passes once the lag is released. Its first retry is
// made to fail as it did in one schedule of the fixed stalestatus
// controller's 1,000 (the StatefulSet's event still on its way to the
// scenario's cache, which wall time alone does not reproduce on demand):
// the second try passes, and so does the fixed controller.
func TestAStepRetriedAfterReleasedLagGetsASecondTry(t *testing.T) {
	// The fault-free reference run does not lag, so its step 1 passes at
	// once: only the replay makes a second call.
	opts, calls := stepOneFailing(func(reference bool, n int) bool { return n == 1 })
	f, injected, err := explore.CheckFaults(t.Context(), opts, "lag@s0")
	if err != nil || f != nil || injected[explore.Lag] != 1 {
		t.Fatalf("got %v, %v, %v injected; want one Lag injected, nothing broken", f, err, injected)
	}
	if got := calls(); len(got) != 3 || !apierrors.IsNotFound(got[0]) || got[2] != nil {
		t.Fatalf("step 1 under lag@s0 returned %v; want NotFound (the lag holds the DB back), the failed first retry, then success", got)
	}
}

// A step that fails the first time, with no lag held back by the step
// before (here lag@s1 starts with the step itself, as in one schedule of
// the fixed stalestatus controller's 1,000 on a busy machine: the
// StatefulSet the controller created in step 0 had not reached the
// scenario's cache), is applied again once the controllers are quiet.
// A step that fails every time is still reported after its three tries,
// with its first error (the cause) and its last.
func TestAStepFailingOnceIsAppliedAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // how many of step 1's tries, from its first, fail
	}{
		{"once", 1},
		{"always", 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, calls := stepOneFailing(func(reference bool, n int) bool { return !reference && n < tc.failures })
			f, injected, err := explore.CheckFaults(t.Context(), opts, "lag@s1")
			if err != nil || injected[explore.Lag] < 1 {
				t.Fatalf("got %v, %v injected; want a Lag injected", err, injected)
			}
			got := calls()
			if tc.failures == 1 {
				if f != nil || len(got) != 2 || !apierrors.IsNotFound(got[0]) || got[1] != nil {
					t.Fatalf("got %v; step 1 returned %v; want NotFound, then success, nothing broken", f, got)
				}
				return
			}
			if f == nil || len(got) != 3 || !strings.Contains(f.Error(), `step 1 (the StatefulSet controller reports its replicas ready): statefulsets.apps "shop" not found (tried again once the controllers were quiet: statefulsets.apps "shop (try 3)" not found)`) {
				t.Fatalf("got %v; step 1 returned %v; want it tried three times and reported with its first error and its last", f, got)
			}
		})
	}
}

// stepOneFailing returns the fixed stalestatus scenario whose step 1
// returns NotFound (naming the try after the first) instead of rolling out when fail(reference, n) is true
// for its n-th call (from 0) in a schedule; reference is true in the
// fault-free run that comes before a replay. calls returns step 1's
// results in the last schedule.
func stepOneFailing(fail func(reference bool, n int) bool) (opts explore.Options, calls func() []error) {
	opts = stalestatus.Options(stalestatus.Fixed)
	create, rollOut, annotate := opts.Steps[0].Do, opts.Steps[1].Do, opts.Steps[2].Do
	var (
		mu        sync.Mutex
		results   []error // step 1's results in the current schedule
		reference = true
	)
	opts.Steps[0].Do = func(ctx context.Context, c *client.Client) error {
		mu.Lock()
		results = nil
		mu.Unlock()
		return create(ctx, c)
	}
	opts.Steps[1].Do = func(ctx context.Context, c *client.Client) error {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if n := len(results); fail(reference, n) {
			name := "shop"
			if n > 0 {
				name = fmt.Sprintf("shop (try %d)", n+1) // a later try's error differs
			}
			err = apierrors.NewNotFound(appsv1.Resource("statefulsets"), name)
		} else {
			err = rollOut(ctx, c)
		}
		results = append(results, err)
		return err
	}
	opts.Steps[2].Do = func(ctx context.Context, c *client.Client) error {
		mu.Lock()
		reference = false
		mu.Unlock()
		return annotate(ctx, c)
	}
	return opts, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(results)
	}
}
