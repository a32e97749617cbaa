package explore_test

import (
	"context"
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
	opts := stalestatus.Options(stalestatus.Fixed)
	create, rollOut := opts.Steps[0].Do, opts.Steps[1].Do
	var (
		mu    sync.Mutex
		calls []error // step 1's results in the current schedule
	)
	opts.Steps[0].Do = func(ctx context.Context, c *client.Client) error {
		mu.Lock()
		calls = nil
		mu.Unlock()
		return create(ctx, c)
	}
	opts.Steps[1].Do = func(ctx context.Context, c *client.Client) error {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if len(calls) == 1 {
			err = apierrors.NewNotFound(appsv1.Resource("statefulsets"), "shop")
		} else {
			err = rollOut(ctx, c)
		}
		calls = append(calls, err)
		return err
	}
	f, injected, err := explore.CheckFaults(t.Context(), opts, "lag@s0")
	if err != nil || f != nil || injected[explore.Lag] != 1 {
		t.Fatalf("got %v, %v, %v injected; want one Lag injected, nothing broken", f, err, injected)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 || !apierrors.IsNotFound(calls[0]) || calls[2] != nil {
		t.Fatalf("step 1 under lag@s0 returned %v; want NotFound (the lag holds the DB back), the failed first retry, then success", calls)
	}
}

// A step that fails the first time, with no lag held back by the step
// before (here lag@s1 starts with the step itself, as in one schedule of
// the fixed stalestatus controller's 1,000 on a busy machine: the
// StatefulSet the controller created in step 0 had not reached the
// scenario's cache), is applied again once the controllers are quiet.
// A step that fails every time is still reported, after its three tries.
func TestAStepFailingOnceIsAppliedAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // how many of step 1's tries, from its first, fail
		broken   bool
	}{
		{"once", 1, false},
		{"always", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := stalestatus.Options(stalestatus.Fixed)
			create, rollOut := opts.Steps[0].Do, opts.Steps[1].Do
			var (
				mu    sync.Mutex
				calls []error // step 1's results in the current schedule
			)
			opts.Steps[0].Do = func(ctx context.Context, c *client.Client) error {
				mu.Lock()
				calls = nil
				mu.Unlock()
				return create(ctx, c)
			}
			reference := true // the fault-free run before the replay
			opts.Steps[1].Do = func(ctx context.Context, c *client.Client) error {
				mu.Lock()
				defer mu.Unlock()
				var err error
				if !reference && len(calls) < tc.failures {
					err = apierrors.NewNotFound(appsv1.Resource("statefulsets"), "shop")
				} else {
					err = rollOut(ctx, c)
				}
				calls = append(calls, err)
				return err
			}
			opts.Steps[2].Do = func(next func(context.Context, *client.Client) error) func(context.Context, *client.Client) error {
				return func(ctx context.Context, c *client.Client) error {
					mu.Lock()
					reference = false
					mu.Unlock()
					return next(ctx, c)
				}
			}(opts.Steps[2].Do)
			f, injected, err := explore.CheckFaults(t.Context(), opts, "lag@s1")
			if err != nil || injected[explore.Lag] < 1 {
				t.Fatalf("got %v, %v injected; want a Lag injected", err, injected)
			}
			mu.Lock()
			defer mu.Unlock()
			if !tc.broken {
				if f != nil || len(calls) != 2 || !apierrors.IsNotFound(calls[0]) || calls[1] != nil {
					t.Fatalf("got %v; step 1 returned %v; want NotFound, then success, nothing broken", f, calls)
				}
				return
			}
			if f == nil || len(calls) != 3 || !strings.Contains(f.Error(), "not found") {
				t.Fatalf("got %v; step 1 returned %v; want it tried three times and reported", f, calls)
			}
		})
	}
}
