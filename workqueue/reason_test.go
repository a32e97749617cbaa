package workqueue_test

import (
	"fmt"
	"testing"
	"time"

	clientgo "k8s.io/client-go/util/workqueue"

	reconcilepkg "github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// apply runs one add, named as in the tables below, for key k. Delays are
// zero, so AddAfter and AddRateLimited add at once, on this goroutine.
func apply(t *testing.T, q *workqueue.Queue[string], op, k string) {
	t.Helper()
	switch op {
	case "add":
		q.Add(k)
	case "replay":
		q.AddReplay(k)
	case "after":
		q.AddAfter(k, 0)
	case "rate-limited":
		q.AddRateLimited(k)
	default:
		t.Fatalf("unknown op %q", op)
	}
}

// zeroDelay is a rate limiter whose delay is always zero.
func zeroDelay() clientgo.TypedRateLimiter[string] {
	return clientgo.NewTypedItemExponentialFailureRateLimiter[string](0, 0)
}

func mustGetWithReason(t *testing.T, q *workqueue.Queue[string]) (string, reconcilepkg.Reason) {
	t.Helper()
	if q.Len() == 0 {
		t.Fatal("Get on an empty queue would block")
	}
	k, r, shutdown := q.GetWithReason()
	if shutdown {
		t.Fatal("Get reported shutdown with keys queued")
	}
	return k, r
}

func TestReasonMerging(t *testing.T) {
	for _, tc := range []struct {
		ops  []string
		want reconcilepkg.Reason
	}{
		{[]string{"add"}, reconcilepkg.ReasonChange},
		{[]string{"replay"}, reconcilepkg.ReasonReplay},
		{[]string{"after"}, reconcilepkg.ReasonRequeue},
		{[]string{"rate-limited"}, reconcilepkg.ReasonRetry},
		// A real change wins over everything, whichever comes first.
		{[]string{"replay", "add"}, reconcilepkg.ReasonChange},
		{[]string{"add", "replay"}, reconcilepkg.ReasonChange},
		{[]string{"rate-limited", "add"}, reconcilepkg.ReasonChange},
		{[]string{"add", "rate-limited", "after"}, reconcilepkg.ReasonChange},
		// Then retry, then requeue, then replay.
		{[]string{"after", "rate-limited"}, reconcilepkg.ReasonRetry},
		{[]string{"rate-limited", "after"}, reconcilepkg.ReasonRetry},
		{[]string{"replay", "rate-limited", "replay"}, reconcilepkg.ReasonRetry},
		{[]string{"replay", "after"}, reconcilepkg.ReasonRequeue},
		{[]string{"after", "replay"}, reconcilepkg.ReasonRequeue},
		{[]string{"replay", "replay"}, reconcilepkg.ReasonReplay},
	} {
		for _, delay := range []time.Duration{0, -1} { // with priorities, and as one FIFO
			t.Run(fmt.Sprintf("%v/ReplayDelay=%v", tc.ops, delay), func(t *testing.T) {
				q, _ := newFakeQueue(t, workqueue.Options[string]{RateLimiter: zeroDelay(), ReplayDelay: delay})
				for _, op := range tc.ops {
					apply(t, q, op, "a")
				}
				q.AddReplay("other") // another key's reason never mixes in
				got := map[string]reconcilepkg.Reason{}
				for q.Len() > 0 {
					k, r := mustGetWithReason(t, q)
					got[k] = r
					q.Done(k)
				}
				if want := map[string]reconcilepkg.Reason{"a": tc.want, "other": reconcilepkg.ReasonReplay}; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("reasons = %v, want %v", got, want)
				}
				if n := workqueue.TrackedCauses(q); n != 0 {
					t.Errorf("%d causes still tracked after draining", n)
				}
			})
		}
	}
}

// Adds while a worker holds a key count for its next Get only: the reason
// of the reconcile in progress does not carry over.
func TestReasonWhileHeld(t *testing.T) {
	for _, tc := range []struct {
		first reconcilepkg.Reason // reason of the Get that holds the key
		held  []string            // adds while held
		want  reconcilepkg.Reason // reason of the next Get
	}{
		{reconcilepkg.ReasonChange, []string{"replay"}, reconcilepkg.ReasonReplay},
		{reconcilepkg.ReasonChange, []string{"rate-limited"}, reconcilepkg.ReasonRetry},
		{reconcilepkg.ReasonChange, []string{"after"}, reconcilepkg.ReasonRequeue},
		{reconcilepkg.ReasonChange, []string{"replay", "rate-limited", "replay"}, reconcilepkg.ReasonRetry},
		{reconcilepkg.ReasonChange, []string{"rate-limited", "add"}, reconcilepkg.ReasonChange},
		{reconcilepkg.ReasonReplay, []string{"add", "replay"}, reconcilepkg.ReasonChange},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.first, tc.held), func(t *testing.T) {
			q, _ := newFakeQueue(t, workqueue.Options[string]{RateLimiter: zeroDelay()})
			if tc.first == reconcilepkg.ReasonReplay {
				q.AddReplay("a")
			} else {
				q.Add("a")
			}
			k, r := mustGetWithReason(t, q)
			if r != tc.first {
				t.Fatalf("first Get: reason %q, want %q", r, tc.first)
			}
			for _, op := range tc.held {
				apply(t, q, op, k)
			}
			if q.Len() != 0 {
				t.Fatalf("a held key was queued a second time: Len = %d", q.Len())
			}
			q.Done(k)
			if _, r := mustGetWithReason(t, q); r != tc.want {
				t.Errorf("next Get: reason %q, want %q", r, tc.want)
			}
			q.Done(k)
			if n := workqueue.TrackedCauses(q); n != 0 {
				t.Errorf("%d causes still tracked after draining", n)
			}
		})
	}
}

// A delay that passes later keeps its own reason, after a change of the key
// was reconciled in between.
func TestReasonOfDelayedAdd(t *testing.T) {
	for _, tc := range []struct {
		op   string
		want reconcilepkg.Reason
	}{
		{"after", reconcilepkg.ReasonRequeue},
		{"rate-limited", reconcilepkg.ReasonRetry},
	} {
		t.Run(tc.op, func(t *testing.T) {
			limiter := clientgo.NewTypedItemExponentialFailureRateLimiter[string](10*time.Second, 10*time.Second)
			q, clk := newFakeQueue(t, workqueue.Options[string]{RateLimiter: limiter})
			switch tc.op {
			case "after":
				q.AddAfter("a", 10*time.Second)
			case "rate-limited":
				q.AddRateLimited("a")
			}
			waitTimerSet(t, clk)
			q.Add("a")
			if k, r := mustGetWithReason(t, q); r != reconcilepkg.ReasonChange {
				t.Errorf("Get before the delay: reason %q, want change", r)
			} else {
				q.Done(k)
			}
			clk.Step(10 * time.Second)
			waitUntil(t, "the delayed key arrives", func() bool { return q.Len() == 1 })
			k, r := mustGetWithReason(t, q)
			if r != tc.want {
				t.Errorf("Get after the delay: reason %q, want %q", r, tc.want)
			}
			q.Done(k)
			if n := workqueue.TrackedCauses(q); n != 0 {
				t.Errorf("%d causes still tracked after draining", n)
			}
		})
	}
}

func TestGetWithReasonAfterShutdown(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{})
	q.ShutDown()
	if _, r, shutdown := q.GetWithReason(); !shutdown || r != "" {
		t.Errorf("GetWithReason after shutdown = (%q, %v), want (\"\", true)", r, shutdown)
	}
}
