package workqueue_test

import (
	"maps"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/hooks"
	reconcilepkg "github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// A postponed key comes back with the priority and reason it was handed
// out with: a replay stays behind real changes, and a change is still
// reported as a change. (AddAfter would make both normal requeues.)
func TestPostponeKeepsPriorityAndReason(t *testing.T) {
	q := workqueue.New(workqueue.Options[string]{RateLimiter: zeroDelay()})
	defer q.ShutDown()

	q.AddReplay("replayed")
	if k, r := mustGetWithReason(t, q); k != "replayed" || r != reconcilepkg.ReasonReplay {
		t.Fatalf("got %q (%s), want replayed (replay)", k, r)
	}
	q.Postpone("replayed", 0)
	q.Done("replayed")
	q.Add("changed")
	if k, r := mustGetWithReason(t, q); k != "changed" || r != reconcilepkg.ReasonChange {
		t.Fatalf("got %q (%s) first, want changed (change) before the postponed replay", k, r)
	}
	q.Postpone("changed", 0)
	q.Done("changed")
	for _, want := range []struct {
		key    string
		reason reconcilepkg.Reason
	}{{"changed", reconcilepkg.ReasonChange}, {"replayed", reconcilepkg.ReasonReplay}} {
		k, r := mustGetWithReason(t, q)
		if k != want.key || r != want.reason {
			t.Fatalf("got %q (%s), want %q (%s)", k, r, want.key, want.reason)
		}
		q.Done(k)
	}

	// A key no worker holds is postponed as AddAfter would queue it.
	q.Postpone("loose", 0)
	if k, r := mustGetWithReason(t, q); k != "loose" || r != reconcilepkg.ReasonRequeue {
		t.Fatalf("got %q (%s), want loose (requeue)", k, r)
	}
	q.Done("loose")
	if n := workqueue.TrackedCauses(q); n != 0 {
		t.Fatalf("%d keys still tracked after everything was done", n)
	}
}

// hooks.Owed reports every key the queue still owes, queued, held or
// delayed, each once, with the reason a worker would be given.
func TestOwedReportsEveryOwedKey(t *testing.T) {
	q, _ := newFakeQueue(t, workqueue.Options[string]{})
	q.Add("held")
	q.AddReplay("held-replay")
	if k := mustGet(t, q); k != "held" {
		t.Fatalf("got %q, want held", k)
	}
	if k := mustGet(t, q); k != "held-replay" {
		t.Fatalf("got %q, want held-replay", k)
	}
	q.AddReplay("held") // a held key asked for again: still a change
	q.Add("queued")
	q.AddReplay("queued-replay")
	q.AddAfter("delayed", time.Hour)
	q.AddRateLimited("retried")
	q.AddAfter("queued", time.Hour) // queued and delayed: reported once

	got := map[string]reconcilepkg.Reason{}
	hooks.Owed(q, func(k string, r reconcilepkg.Reason) {
		if _, twice := got[k]; twice {
			t.Errorf("%q reported twice", k)
		}
		got[k] = r
	})
	want := map[string]reconcilepkg.Reason{
		"held":          reconcilepkg.ReasonChange,
		"held-replay":   reconcilepkg.ReasonReplay,
		"queued":        reconcilepkg.ReasonChange,
		"queued-replay": reconcilepkg.ReasonReplay,
		"delayed":       reconcilepkg.ReasonRequeue,
		"retried":       reconcilepkg.ReasonRetry,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Owed reported %v, want %v", got, want)
	}

	q.Done("held")
	q.Done("held-replay")
	delete(want, "held-replay")
	want["held"] = reconcilepkg.ReasonReplay // its change was processed; a replay is left
	got = map[string]reconcilepkg.Reason{}
	hooks.Owed(q, func(k string, r reconcilepkg.Reason) { got[k] = r })
	if !maps.Equal(got, want) {
		t.Fatalf("after Done, Owed reported %v, want %v", got, want)
	}
}
