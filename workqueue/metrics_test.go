package workqueue_test

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	clientgo "k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-dev/converge/workqueue"
)

// fakeMetrics is a MetricsProvider that keeps every metric's value, keyed by
// "<queue name>/<metric>".
type fakeMetrics struct {
	mu     sync.Mutex
	values map[string]float64 // mu guards values
	counts map[string]int     // observations per histogram; mu guards counts
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{values: map[string]float64{}, counts: map[string]int{}}
}

type fakeMetric struct {
	m   *fakeMetrics
	key string
}

func (f fakeMetric) Inc()          { f.add(1) }
func (f fakeMetric) Dec()          { f.add(-1) }
func (f fakeMetric) add(v float64) { f.m.mu.Lock(); f.m.values[f.key] += v; f.m.mu.Unlock() }
func (f fakeMetric) Set(v float64) { f.m.mu.Lock(); f.m.values[f.key] = v; f.m.mu.Unlock() }
func (f fakeMetric) Observe(float64) {
	f.m.mu.Lock()
	f.m.counts[f.key]++
	f.m.mu.Unlock()
}

func (m *fakeMetrics) metric(name, what string) fakeMetric {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := name + "/" + what
	m.values[key] = 0
	return fakeMetric{m: m, key: key}
}

func (m *fakeMetrics) NewDepthMetric(name string) clientgo.GaugeMetric {
	return m.metric(name, "depth")
}
func (m *fakeMetrics) NewAddsMetric(name string) clientgo.CounterMetric {
	return m.metric(name, "adds")
}
func (m *fakeMetrics) NewLatencyMetric(name string) clientgo.HistogramMetric {
	return m.metric(name, "queue_duration")
}
func (m *fakeMetrics) NewWorkDurationMetric(name string) clientgo.HistogramMetric {
	return m.metric(name, "work_duration")
}
func (m *fakeMetrics) NewUnfinishedWorkSecondsMetric(name string) clientgo.SettableGaugeMetric {
	return m.metric(name, "unfinished_work_seconds")
}
func (m *fakeMetrics) NewLongestRunningProcessorSecondsMetric(name string) clientgo.SettableGaugeMetric {
	return m.metric(name, "longest_running_processor_seconds")
}
func (m *fakeMetrics) NewRetriesMetric(name string) clientgo.CounterMetric {
	return m.metric(name, "retries")
}

func (m *fakeMetrics) value(key string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[key]
}

func (m *fakeMetrics) observations(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

func (m *fakeMetrics) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.values))
}

func TestMetrics(t *testing.T) {
	m := newFakeMetrics()
	clk := clocktesting.NewFakeClock(epoch)
	q := workqueue.NewWithClock(workqueue.Options[string]{Name: "pods", MetricsProvider: m}, clk)
	t.Cleanup(q.ShutDown)

	wantKeys := []string{
		"pods/adds", "pods/depth", "pods/longest_running_processor_seconds", "pods/queue_duration",
		"pods/retries", "pods/unfinished_work_seconds", "pods/work_duration",
	}
	if got := m.keys(); !slices.Equal(got, wantKeys) {
		t.Fatalf("metrics created: %q, want %q", got, wantKeys)
	}

	check := func(step string, want map[string]float64) {
		t.Helper()
		for what, v := range want {
			if got := m.value("pods/" + what); got != v {
				t.Errorf("after %s: %s = %v, want %v", step, what, got, v)
			}
		}
	}

	q.Add("a")
	q.Add("b")
	q.Add("a") // deduplicated: not an add
	q.AddReplay("c")
	check("three keys added", map[string]float64{"adds": 3, "depth": 3, "retries": 0})

	if k := mustGet(t, q); k != "a" {
		t.Fatalf("Get returned %q", k)
	}
	check("Get", map[string]float64{"adds": 3, "depth": 2})
	if n := m.observations("pods/queue_duration"); n != 1 {
		t.Errorf("queue_duration observations = %d, want 1", n)
	}

	// The unfinished-work gauges are updated every 500 ms by a goroutine
	// that starts with the queue; wait for its ticker, then let a second pass.
	waitUntil(t, "the unfinished-work ticker is set", func() bool { return clk.Waiters() == baseWaiters+1 })
	clk.Step(time.Second)
	waitUntil(t, "unfinished work is 1s", func() bool {
		return m.value("pods/unfinished_work_seconds") == 1 && m.value("pods/longest_running_processor_seconds") == 1
	})

	q.Done("a")
	if n := m.observations("pods/work_duration"); n != 1 {
		t.Errorf("work_duration observations = %d, want 1", n)
	}

	q.AddRateLimited("a")
	q.AddAfter("d", 0)
	q.AddAfter("b", 0) // a retry, though b is already queued
	check("retries", map[string]float64{"retries": 3})
}

func TestMetricsUnnamed(t *testing.T) {
	m := newFakeMetrics()
	q, _ := newFakeQueue(t, workqueue.Options[string]{MetricsProvider: m})
	q.Add("a")
	q.AddRateLimited("b")
	drain(t, q)
	if got := m.keys(); len(got) != 0 {
		t.Fatalf("an unnamed queue created metrics %q", got)
	}
}
