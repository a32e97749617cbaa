package syncgc

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

var synced = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// look is one look of a golden trace: the controllers as Hold reads them,
// after since past the sync, and whether the bound may be lifted then.
type look struct {
	since   time.Duration
	cs      []Controller
	drained bool
}

// listener is a source's listener, handed every cached object or not yet.
type listener bool

func (l listener) HasSynced() bool                     { return bool(l) }
func (l listener) HasSyncedChecker() cache.DoneChecker { return nil }

var _ cache.ResourceEventHandlerRegistration = listener(false)

// running is a running controller whose listeners were handed every
// cached object.
func running(name string, reconciles uint64, objects, queued int) Controller {
	return Controller{Name: name, Running: true, Listeners: []Listener{listener(true), listener(true)},
		Reconciles: reconciles, Objects: objects, Queued: queued}
}

// handing is a running controller whose second listener is still being
// handed the cached objects.
func handing(name string, reconciles uint64, objects, queued int) Controller {
	c := running(name, reconciles, objects, queued)
	c.Listeners = []Listener{listener(true), listener(false)}
	return c
}

func TestBacklogDrained(t *testing.T) {
	for _, tc := range []struct {
		name  string
		took  time.Duration
		looks []look
	}{
		{"no controller: at once", time.Second, []look{{0, nil, true}}},
		{"a controller reconciles once per object its informer held", time.Second, []look{
			{0, []Controller{{Name: "a"}}, false}, // started, not running yet
			{Look, []Controller{running("a", 0, 1000, 0)}, false},
			{2 * Look, []Controller{running("a", 400, 1000, 600)}, false},
			{3 * Look, []Controller{running("a", 999, 1000, 1)}, false},
			{4 * Look, []Controller{running("a", 1000, 1000, 0)}, true},
		}},
		{"reconciles keeping up with a listener still handed the cached objects are not the backlog", time.Second, []look{
			{0, []Controller{handing("a", 10, 10, 0)}, false}, // its informer counted only the objects handed so far
			{Look, []Controller{handing("a", 400, 400, 0)}, false},
			{2 * Look, []Controller{handing("a", 400, 400, 0)}, false}, // a stall while handing is not idleness
			{3 * Look, []Controller{running("a", 900, 1000, 100)}, false},
			{4 * Look, []Controller{running("a", 1000, 1000, 0)}, true},
		}},
		{"a source without a listener has none to wait for", time.Second, []look{
			{0, []Controller{{Name: "a", Running: true, Listeners: []Listener{nil, listener(true)}, Reconciles: 5, Objects: 5}}, true},
		}},
		{"a controller whose reconciles all fail is done after one pass", time.Second, []look{
			{0, []Controller{running("a", 10, 500, 490)}, false},
			{Look, []Controller{running("a", 500, 500, 250)}, true}, // its keys are back, in backoff and queued
			{2 * Look, []Controller{running("a", 900, 500, 500)}, true},
		}},
		{"every controller must be done", time.Second, []look{
			{0, []Controller{running("a", 100, 100, 0), running("b", 0, 100, 100)}, false},
			{Look, []Controller{running("a", 150, 100, 40), running("b", 50, 100, 50)}, false}, // a stays done
			{2 * Look, []Controller{running("a", 200, 100, 40), running("b", 100, 100, 0)}, true},
		}},
		{"a controller idle for a look is done though it reconciled fewer keys than objects", time.Second, []look{
			{0, []Controller{running("a", 3, 1000, 0)}, false}, // its predicates passed 3 keys
			{Look, []Controller{running("a", 3, 1000, 0)}, true},
		}},
		{"an empty queue while keys are still reconciled is not idleness", time.Second, []look{
			{0, []Controller{running("a", 3, 1000, 0)}, false},
			{Look, []Controller{running("a", 9, 1000, 0)}, false},
			{2 * Look, []Controller{running("a", 9, 1000, 2)}, false},
			{3 * Look, []Controller{running("a", 11, 1000, 0)}, false},
		}},
		{"an empty queue before the workers run is not idleness", time.Second, []look{
			{0, []Controller{{Name: "a"}}, false},
			{Look, []Controller{running("a", 0, 1000, 0)}, false},
			{2 * Look, []Controller{running("a", 0, 1000, 1000)}, false},
		}},
		{"a controller that stops or is not run is not waited for", time.Second, []look{
			{0, []Controller{running("a", 0, 10, 10), running("b", 0, 10, 10)}, false},
			{Look, []Controller{running("b", 10, 10, 0)}, true},
		}},
		{"a controller that never drains is let go at MinHold after a short sync", time.Second, []look{
			{0, []Controller{running("a", 0, 1000, 1000)}, false},
			{MinHold - time.Nanosecond, []Controller{running("a", 1, 1000, 999)}, false},
			{MinHold, []Controller{running("a", 2, 1000, 998)}, true},
		}},
		{"a controller that never runs is let go as long after a long sync as the sync took", 3 * time.Minute, []look{
			{0, []Controller{{Name: "a"}}, false},
			{MinHold, []Controller{{Name: "a"}}, false},
			{3*time.Minute - time.Nanosecond, []Controller{{Name: "a"}}, false},
			{3 * time.Minute, []Controller{{Name: "a"}}, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBacklog(synced, tc.took)
			for i, l := range tc.looks {
				if got := b.Drained(synced.Add(l.since), l.cs); got != l.drained {
					t.Errorf("look %d (+%v, %+v): drained %v, want %v", i, l.since, l.cs, got, l.drained)
				}
			}
		})
	}
}

// held runs Hold on a fake clock whose look hands out the controllers the
// test sends on looks; restored is closed once Hold restored the bound.
func held(ctx context.Context, took time.Duration) (clk *clocktesting.FakeClock, looks chan<- []Controller, restored <-chan struct{}) {
	clk = clocktesting.NewFakeClock(synced)
	ls, done := make(chan []Controller), make(chan struct{})
	tick := clk.NewTicker(Look)
	go Hold(ctx, clk.Now, tick.C(), func() { close(done) }, took, func() []Controller { return <-ls })
	return clk, ls, done
}

// send hands Hold its next look, failing the test if Hold restored the
// bound instead of taking it.
func send(t *testing.T, looks chan<- []Controller, restored <-chan struct{}, cs []Controller) {
	t.Helper()
	select {
	case looks <- cs:
	case <-restored:
		t.Fatalf("the bound was lifted before Hold saw %+v", cs)
	}
}

func TestHoldRestoresOnceTheBacklogIsWorkedOff(t *testing.T) {
	clk, looks, restored := held(t.Context(), time.Second)
	send(t, looks, restored, []Controller{running("a", 0, 100, 100)})
	clk.Step(Look)
	send(t, looks, restored, []Controller{running("a", 60, 100, 40)})
	clk.Step(Look)
	send(t, looks, restored, []Controller{running("a", 100, 100, 0)})
	<-restored // a Hold that never restores fails the test by its timeout
	if got := clk.Since(synced); got != 2*Look {
		t.Errorf("restored at +%v, want at the look that saw the backlog worked off (+%v)", got, 2*Look)
	}
}

func TestHoldNeverKeepsTheBoundPastItsDeadline(t *testing.T) {
	clk, looks, restored := held(t.Context(), time.Second)
	stuck := []Controller{running("a", 5, 100, 95)} // every worker is blocked: no progress
	send(t, looks, restored, stuck)
	for clk.Since(synced) < MinHold {
		clk.Step(10 * time.Second)
		send(t, looks, restored, stuck)
	}
	<-restored
}

func TestHoldRestoresWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	_, looks, restored := held(ctx, time.Second)
	send(t, looks, restored, []Controller{running("a", 0, 100, 100)})
	cancel()
	<-restored
}
