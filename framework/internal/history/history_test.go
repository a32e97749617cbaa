package history

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

func TestHistoryKeepsTheMostRecentlyReconciledKeys(t *testing.T) {
	h := New(3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func(i int) reconcile.Request { return reconcile.Request{Namespace: "ns", Name: fmt.Sprint(i)} }
	for i := range 5 {
		h.Record(key(i), Record{Start: at, Result: "success"})
	}
	h.Record(key(2), Record{Start: at, Result: "success"}) // 2 is now the most recent
	h.Record(key(5), Record{Start: at, Result: "success"}) // evicts 3, the least recent
	if n := h.Keys(); n != 3 {
		t.Fatalf("keys = %d, want the budget of 3", n)
	}
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: false, 4: true, 5: true} {
		if got := h.Of(key(i)) != nil; got != want {
			t.Errorf("key %d kept = %v, want %v", i, got, want)
		}
	}
	if len(h.slots) != 3 || cap(h.slots) != 3 {
		t.Fatalf("slots: len %d cap %d, want a fixed array of 3", len(h.slots), cap(h.slots))
	}
}

func TestHistoryKeepsTheLastReconcilesNewestFirst(t *testing.T) {
	h := New(0)
	req := reconcile.Request{Namespace: "ns", Name: "a"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range historyDepth + 3 {
		h.Record(req, Record{Start: at.Add(time.Duration(i) * time.Second), Err: fmt.Sprint("attempt ", i), Result: "error"})
	}
	recs := h.Of(req)
	if len(recs) != historyDepth {
		t.Fatalf("%d records, want %d", len(recs), historyDepth)
	}
	for j, r := range recs {
		if want := fmt.Sprint("attempt ", historyDepth+2-j); r.Err != want {
			t.Errorf("record %d: %q, want %q (newest first)", j, r.Err, want)
		}
	}
	long := strings.Repeat("x", 10*maxErrorText)
	h.Record(req, Record{Start: at, Err: long, Result: "error"})
	if got := h.Of(req)[0].Err; len(got) != maxErrorText+len(historyTruncatedTag) || !strings.HasSuffix(got, historyTruncatedTag) {
		t.Fatalf("a long error is kept as %d bytes, want %d ending %q", len(got), maxErrorText+len(historyTruncatedTag), historyTruncatedTag)
	}
}

func TestHistoryHoldsTheRecordsAKeyHadAndReusesThem(t *testing.T) {
	// A controller after its first sync has reconciled most keys once: a
	// slot then holds one record, not historyDepth. A recycled slot keeps
	// what it grew to for the next key, which sees none of the last one's.
	h := New(2)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	once, often := reconcile.Request{Name: "once"}, reconcile.Request{Name: "often"}
	h.Record(once, Record{Start: at, Result: "success"})
	for i := range historyDepth + 2 {
		h.Record(often, Record{Start: at, Result: "error", Err: fmt.Sprint("attempt ", i)})
	}
	slot := func(req reconcile.Request) *keyHistory { return &h.slots[h.index[req]] }
	if got := cap(slot(once).recs); got != 1 {
		t.Errorf("a key reconciled once holds room for %d records, want 1", got)
	}
	if got := cap(slot(often).recs); got != historyDepth {
		t.Errorf("a key reconciled %d times holds room for %d records, want %d", historyDepth+2, got, historyDepth)
	}
	h.Record(once, Record{Start: at, Result: "success"}) // often is now the least recent
	next := reconcile.Request{Name: "next"}
	// AllocsPerRun records next twice: once to warm up, once measured.
	if allocs := testing.AllocsPerRun(1, func() { h.Record(next, Record{Start: at, Result: "success"}) }); allocs != 0 {
		t.Errorf("recording a key into a recycled slot allocated %v times, want none", allocs)
	}
	if recs := h.Of(next); len(recs) != 2 || recs[0].Err != "" || recs[1].Err != "" {
		t.Errorf("the key in a recycled slot has records %+v, want only its own", recs)
	}
	if h.Of(often) != nil {
		t.Errorf("the evicted key still has records")
	}
}

func TestHistorySeries(t *testing.T) {
	h := New(-1) // no keys: the series and totals are still kept
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	req := reconcile.Request{Name: "a"}
	h.Record(req, Record{Start: now.Add(-10 * time.Minute), Took: time.Second}) // out of the window
	h.Record(req, Record{Start: now.Add(-time.Minute), Took: 2 * time.Millisecond})
	h.Record(req, Record{Start: now.Add(-time.Minute), Took: 4 * time.Millisecond, Err: "boom"})
	h.Record(req, Record{Start: now, Took: time.Millisecond})
	points, total, errs := h.Recent(now)
	if total != 4 || errs != 1 || h.Keys() != 0 {
		t.Fatalf("totals %d/%d, keys %d; want 4/1 and no keys", total, errs, h.Keys())
	}
	if len(points) != seriesBuckets {
		t.Fatalf("%d points, want %d", len(points), seriesBuckets)
	}
	minuteAgo := points[len(points)-1-int(time.Minute/SeriesBucket)]
	if minuteAgo.N != 2 || minuteAgo.Errors != 1 || minuteAgo.Took != 6*time.Millisecond {
		t.Errorf("a minute ago: %+v", minuteAgo)
	}
	if last := points[len(points)-1]; last.N != 1 {
		t.Errorf("now: %+v", last)
	}
	sum := 0
	for _, p := range points {
		sum += p.N
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
	h := New(0)
	start := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Record(keys[i%objects], Record{Start: start, Took: time.Millisecond, Result: "success", Reason: reconcile.ReasonChange})
		i++
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
	b.ReportMetric(float64(h.Keys()), "keys-kept")
	runtime.KeepAlive(h)
	runtime.KeepAlive(keys)
}

func TestHistoryForgetsADisengagedClustersKeys(t *testing.T) {
	h := New(4)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func(cluster string, i int) reconcile.Request {
		return reconcile.Request{Cluster: cluster, Namespace: "ns", Name: fmt.Sprint(i)}
	}
	for i := range 2 {
		h.Record(key("edge-1", i), Record{Start: at, Result: "error", Err: "boom"})
		h.Record(key("", i), Record{Start: at, Result: "success"})
	}
	if n := h.ForgetCluster("edge-1"); n != 2 {
		t.Fatalf("ForgetCluster = %d, want the 2 keys of edge-1", n)
	}
	if n := h.Keys(); n != 2 {
		t.Fatalf("keys = %d, want the 2 of the manager's own cluster", n)
	}
	for _, s := range h.slots {
		if s.req.Cluster == "edge-1" || (s.n == 0 && s.recs != nil) {
			t.Fatalf("slot %+v still holds edge-1's key or records", s)
		}
	}
	var last []string
	h.EachLast(func(req reconcile.Request, _ *Record) { last = append(last, req.String()) })
	if len(last) != 2 {
		t.Fatalf("EachLast = %v, want the own cluster's 2 keys", last)
	}
	// The freed slots are taken first: two new keys evict none of the
	// kept ones, and a third evicts the least recent kept one.
	h.Record(key("edge-2", 0), Record{Start: at, Result: "success"})
	h.Record(key("edge-2", 1), Record{Start: at, Result: "success"})
	if h.Of(key("", 0)) == nil || h.Of(key("", 1)) == nil || h.Keys() != 4 {
		t.Fatalf("new keys evicted kept ones: %d keys", h.Keys())
	}
	h.Record(key("edge-2", 2), Record{Start: at, Result: "success"})
	if h.Of(key("", 0)) != nil || h.Of(key("", 1)) == nil || h.Keys() != 4 {
		t.Fatalf("the least recent key was not the one evicted: %d keys", h.Keys())
	}
	if n := h.ForgetCluster("absent"); n != 0 {
		t.Fatalf("ForgetCluster of a cluster without keys = %d", n)
	}
}
