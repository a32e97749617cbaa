package framework

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

func TestHistoryKeepsTheMostRecentlyReconciledKeys(t *testing.T) {
	h := newHistory(3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func(i int) reconcile.Request { return reconcile.Request{Namespace: "ns", Name: fmt.Sprint(i)} }
	for i := range 5 {
		h.record(key(i), reconcileRecord{start: at, result: resultSuccess})
	}
	h.record(key(2), reconcileRecord{start: at, result: resultSuccess}) // 2 is now the most recent
	h.record(key(5), reconcileRecord{start: at, result: resultSuccess}) // evicts 3, the least recent
	if n := h.keys(); n != 3 {
		t.Fatalf("keys = %d, want the budget of 3", n)
	}
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: false, 4: true, 5: true} {
		if got := h.of(key(i)) != nil; got != want {
			t.Errorf("key %d kept = %v, want %v", i, got, want)
		}
	}
	if len(h.slots) != 3 || cap(h.slots) != 3 {
		t.Fatalf("slots: len %d cap %d, want a fixed array of 3", len(h.slots), cap(h.slots))
	}
}

func TestHistoryKeepsTheLastReconcilesNewestFirst(t *testing.T) {
	h := newHistory(0)
	req := reconcile.Request{Namespace: "ns", Name: "a"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range historyDepth + 3 {
		h.record(req, reconcileRecord{start: at.Add(time.Duration(i) * time.Second), err: fmt.Sprint("attempt ", i), result: resultError})
	}
	recs := h.of(req)
	if len(recs) != historyDepth {
		t.Fatalf("%d records, want %d", len(recs), historyDepth)
	}
	for j, r := range recs {
		if want := fmt.Sprint("attempt ", historyDepth+2-j); r.err != want {
			t.Errorf("record %d: %q, want %q (newest first)", j, r.err, want)
		}
	}
	long := strings.Repeat("x", 10*maxErrorText)
	h.record(req, reconcileRecord{start: at, err: long, result: resultError})
	if got := h.of(req)[0].err; len(got) != maxErrorText+len(historyTruncatedTag) || !strings.HasSuffix(got, historyTruncatedTag) {
		t.Fatalf("a long error is kept as %d bytes, want %d ending %q", len(got), maxErrorText+len(historyTruncatedTag), historyTruncatedTag)
	}
}

func TestHistoryHoldsTheRecordsAKeyHadAndReusesThem(t *testing.T) {
	// A controller after its first sync has reconciled most keys once: a
	// slot then holds one record, not historyDepth. A recycled slot keeps
	// what it grew to for the next key, which sees none of the last one's.
	h := newHistory(2)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	once, often := reconcile.Request{Name: "once"}, reconcile.Request{Name: "often"}
	h.record(once, reconcileRecord{start: at, result: resultSuccess})
	for i := range historyDepth + 2 {
		h.record(often, reconcileRecord{start: at, result: resultError, err: fmt.Sprint("attempt ", i)})
	}
	slot := func(req reconcile.Request) *keyHistory { return &h.slots[h.index[req]] }
	if got := cap(slot(once).recs); got != 1 {
		t.Errorf("a key reconciled once holds room for %d records, want 1", got)
	}
	if got := cap(slot(often).recs); got != historyDepth {
		t.Errorf("a key reconciled %d times holds room for %d records, want %d", historyDepth+2, got, historyDepth)
	}
	h.record(once, reconcileRecord{start: at, result: resultSuccess}) // often is now the least recent
	next := reconcile.Request{Name: "next"}
	// AllocsPerRun records next twice: once to warm up, once measured.
	if allocs := testing.AllocsPerRun(1, func() { h.record(next, reconcileRecord{start: at, result: resultSuccess}) }); allocs != 0 {
		t.Errorf("recording a key into a recycled slot allocated %v times, want none", allocs)
	}
	if recs := h.of(next); len(recs) != 2 || recs[0].err != "" || recs[1].err != "" {
		t.Errorf("the key in a recycled slot has records %+v, want only its own", recs)
	}
	if h.of(often) != nil {
		t.Errorf("the evicted key still has records")
	}
}

func TestHistorySeries(t *testing.T) {
	h := newHistory(-1) // no keys: the series and totals are still kept
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	req := reconcile.Request{Name: "a"}
	h.record(req, reconcileRecord{start: now.Add(-10 * time.Minute), took: time.Second}) // out of the window
	h.record(req, reconcileRecord{start: now.Add(-time.Minute), took: 2 * time.Millisecond})
	h.record(req, reconcileRecord{start: now.Add(-time.Minute), took: 4 * time.Millisecond, err: "boom"})
	h.record(req, reconcileRecord{start: now, took: time.Millisecond})
	points, total, errs := h.recent(now)
	if total != 4 || errs != 1 || h.keys() != 0 {
		t.Fatalf("totals %d/%d, keys %d; want 4/1 and no keys", total, errs, h.keys())
	}
	if len(points) != seriesBuckets {
		t.Fatalf("%d points, want %d", len(points), seriesBuckets)
	}
	minuteAgo := points[len(points)-1-int(time.Minute/seriesBucket)]
	if minuteAgo.n != 2 || minuteAgo.errors != 1 || minuteAgo.took != 6*time.Millisecond {
		t.Errorf("a minute ago: %+v", minuteAgo)
	}
	if last := points[len(points)-1]; last.n != 1 {
		t.Errorf("now: %+v", last)
	}
	sum := 0
	for _, p := range points {
		sum += p.n
	}
	if sum != 3 {
		t.Errorf("the window holds %d reconciles, want 3 (the one 10 minutes ago is out)", sum)
	}
}

// BenchmarkHistory100kKeys records one reconcile of each of 100,000 keys
// over and over: the history holds its fixed budget of keys whatever the
// number of objects, and recording allocates nothing.
func BenchmarkHistory100kKeys(b *testing.B) {
	const objects = 100_000
	keys := make([]reconcile.Request, objects)
	for i := range keys {
		keys[i] = reconcile.Request{Namespace: "ns", Name: fmt.Sprint("object-", i)}
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := newHistory(0)
	start := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.record(keys[i%objects], reconcileRecord{start: start, took: time.Millisecond, result: resultSuccess, reason: reconcile.ReasonChange})
		i++
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
	b.ReportMetric(float64(h.keys()), "keys-kept")
	runtime.KeepAlive(h)
	runtime.KeepAlive(keys)
}

// nopQueue is a queue that does nothing, so that a benchmark measures the
// controller's own work around a reconcile.
type nopQueue struct{}

func (nopQueue) Add(reconcile.Request)                                  {}
func (nopQueue) AddReplay(reconcile.Request)                            {}
func (nopQueue) AddAfter(reconcile.Request, time.Duration)              {}
func (nopQueue) AddRateLimited(reconcile.Request)                       {}
func (nopQueue) Postpone(reconcile.Request, time.Duration)              {}
func (nopQueue) Forget(reconcile.Request)                               {}
func (nopQueue) NumRequeues(reconcile.Request) int                      { return 0 }
func (nopQueue) Done(reconcile.Request)                                 {}
func (nopQueue) Len() int                                               { return 0 }
func (nopQueue) ShutDown()                                              {}
func (nopQueue) Stats() workqueue.Stats                                 { return workqueue.Stats{} }
func (nopQueue) Inspect(reconcile.Request) workqueue.KeyState           { return workqueue.KeyState{} }
func (nopQueue) Keys(int, int) []workqueue.QueuedKey[reconcile.Request] { return nil }
func (nopQueue) GetWithReason() (reconcile.Request, reconcile.Reason, bool) {
	return reconcile.Request{}, "", true
}

// BenchmarkReconcileOne is the controller's work around one successful
// reconcile of one of 100,000 keys (the reconciler does nothing), with the
// default history and without one (HistoryKeys < 0).
func BenchmarkReconcileOne(b *testing.B) {
	keys := make([]reconcile.Request, 100_000)
	for i := range keys {
		keys[i] = reconcile.Request{Namespace: "ns", Name: fmt.Sprint("object-", i)}
	}
	for _, bc := range []struct {
		name        string
		historyKeys int
	}{{"history", 0}, {"no-history", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			log := logr.FromSlogHandler(slog.DiscardHandler)
			c := &Controller{
				name:  "bench",
				opts:  ControllerOptions{Workers: 1},
				queue: nopQueue{},
				reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}),
				log:     log,
				deeper:  deeperSink(log.GetSink()),
				metrics: newMetrics().forController("bench", 1),
				history: newHistory(bc.historyKeys),
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.reconcileOne(b.Context(), keys[i%len(keys)], reconcile.ReasonChange, 1)
				i++
			}
		})
	}
}
