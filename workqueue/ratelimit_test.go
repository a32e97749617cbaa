package workqueue_test

import (
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-dev/converge/workqueue"
)

// backoff is the default per-key delay after n earlier AddRateLimited calls.
func backoff(n int) time.Duration {
	const limit = 1000 * time.Second
	if n >= 40 {
		return limit
	}
	return min(5*time.Millisecond<<n, limit)
}

func TestDefaultRateLimiterBackoff(t *testing.T) {
	rl := workqueue.DefaultRateLimiter[string]()
	for n := range 25 { // 5ms << 18 > 1000s: the last few hit the cap
		if got, want := rl.When("k"), backoff(n); got != want {
			t.Fatalf("When #%d = %v, want %v", n+1, got, want)
		}
		if got := rl.NumRequeues("k"); got != n+1 {
			t.Fatalf("NumRequeues after %d Whens = %d", n+1, got)
		}
	}
	if got := rl.When("other"); got != 5*time.Millisecond {
		t.Fatalf("backoff is per key: When(other) = %v, want 5ms", got)
	}
	rl.Forget("k")
	if got := rl.NumRequeues("k"); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
	if got := rl.When("k"); got != 5*time.Millisecond {
		t.Fatalf("When after Forget = %v, want 5ms", got)
	}
}

// TestDefaultRateLimiterBucket checks the overall token bucket: 100 requeues
// pass at the per-key delay, then they are spread at 10 per second. The
// bucket runs on real time, so the bounds leave 50 ms for the test itself.
func TestDefaultRateLimiterBucket(t *testing.T) {
	rl := workqueue.DefaultRateLimiter[int]()
	for k := range 100 {
		if got := rl.When(k); got != 5*time.Millisecond {
			t.Fatalf("When(%d) within the burst = %v, want the per-key 5ms", k, got)
		}
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		got := rl.When(100 + i)
		if got > want || got < want-50*time.Millisecond {
			t.Fatalf("When #%d past the burst = %v, want about %v", 101+i, got, want)
		}
	}
	if got := rl.NumRequeues(100); got != 1 {
		t.Fatalf("NumRequeues = %d, want 1", got)
	}
}

// TestAddRateLimited checks, on a fake clock, that each AddRateLimited of a
// key makes it reappear exactly after the growing backoff, capped at 1000 s,
// and that Forget starts it over.
func TestAddRateLimited(t *testing.T) {
	clk := newTimerClock()
	q := workqueue.NewWithClock(workqueue.Options[string]{}, clk)
	t.Cleanup(q.ShutDown)

	expect := func(n int) {
		t.Helper()
		timers := clk.timers.Load()
		q.AddRateLimited("k")
		if got := q.NumRequeues("k"); got != n+1 {
			t.Fatalf("NumRequeues = %d, want %d", got, n+1)
		}
		waitUntil(t, "the delaying queue sets its timer", func() bool { return clk.timers.Load() > timers })
		d := backoff(n)
		clk.advance(t, d-time.Nanosecond)
		if l := q.Len(); l != 0 {
			t.Fatalf("requeue #%d: key back after %v, want %v", n+1, d-time.Nanosecond, d)
		}
		clk.Step(time.Nanosecond)
		if k, _ := q.Get(); k != "k" {
			t.Fatalf("Get returned %q", k)
		}
		q.Done("k")
	}
	for n := range 21 {
		expect(n)
	}
	q.Forget("k")
	if got := q.NumRequeues("k"); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
	expect(0)
}

func TestCustomRateLimiter(t *testing.T) {
	rl := &countingLimiter{}
	q, _ := newFakeQueue(t, workqueue.Options[string]{RateLimiter: rl})
	q.AddReplay("x")
	q.AddRateLimited("k") // zero delay: queued at once, normal priority
	if got := drain(t, q); len(got) != 2 || got[0] != "k" {
		t.Fatalf("drained %q, want k first", got)
	}
	q.Forget("k")
	if w, f, n := rl.when.Load(), rl.forget.Load(), q.NumRequeues("k"); w != 1 || f != 1 || n != 42 {
		t.Fatalf("When calls %d, Forget calls %d, NumRequeues %d; want 1, 1, 42", w, f, n)
	}
}

type countingLimiter struct{ when, forget atomic.Int32 }

func (l *countingLimiter) When(string) time.Duration { l.when.Add(1); return 0 }
func (l *countingLimiter) Forget(string)             { l.forget.Add(1) }
func (l *countingLimiter) NumRequeues(string) int    { return 42 }

// heartbeat is client-go's delaying queue maxWait: it wakes every 10 s.
const heartbeat = 10 * time.Second

// timerClock is a fake clock that counts NewTimer calls. client-go's delaying
// queue reads Now and then sets its timer; a Step between the two leaves the
// timer late. Counting timers lets a test wait until the queue is settled.
type timerClock struct {
	*clocktesting.FakeClock
	timers atomic.Int64
}

func newTimerClock() *timerClock { return &timerClock{FakeClock: clocktesting.NewFakeClock(epoch)} }

// NewTimer counts the timer once it is set, so that a test that sees the
// count go up may step the clock and fire it.
func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	timer := c.FakeClock.NewTimer(d)
	c.timers.Add(1)
	return timer
}

// advance steps the clock by d while a delayed key that is not due by then
// waits. At each heartbeat the delaying queue wakes and sets a new timer;
// advance stops there and waits for that timer, so that no later step races
// the queue's Now.
func (c *timerClock) advance(t *testing.T, d time.Duration) {
	t.Helper()
	for d > 0 {
		now := c.Now()
		next := epoch.Add(now.Sub(epoch).Truncate(heartbeat) + heartbeat)
		step := min(d, next.Sub(now))
		timers := c.timers.Load()
		c.Step(step)
		d -= step
		if step == next.Sub(now) {
			waitUntil(t, "the delaying queue re-arms after its heartbeat", func() bool { return c.timers.Load() > timers })
		}
	}
}
