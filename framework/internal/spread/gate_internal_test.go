package spread

import (
	"context"
	"errors"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// flowLog records the last pause or resume of a queue's flows.
type flowLog struct {
	mu   sync.Mutex
	last string
}

func (f *flowLog) set(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = s
}
func (f *flowLog) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}
func (f *flowLog) Add(reconcile.Request)  {}
func (f *flowLog) PauseFlow(flow string)  { f.set("pause " + flow) }
func (f *flowLog) ResumeFlow(flow string) { f.set("resume " + flow) }
func (f *flowLog) DropFlow(string) int    { return 0 }

// syncedSource is a binding.Source whose informer synced.
type syncedSource struct{}

func (syncedSource) String() string { return "synced" }
func (syncedSource) Start(context.Context) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}
func (syncedSource) WaitForSync(context.Context) error                           { return nil }
func (syncedSource) RemoveListener(cache.ResourceEventHandlerRegistration) error { return nil }

// newGate returns a Gate over a Set that does not run, whose providers
// found cluster edge-1 (returned, not engaged), of an API server that is
// never asked.
func newGate(t *testing.T) (*Gate, *cluster.Cluster) {
	t.Helper()
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	local, err := cluster.New(cluster.Target{Config: cfg}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	edge, err := cluster.New(cluster.Target{Name: "edge-1", Config: cfg}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := New(sharding.Options{Clusters: true})
	if g.set, err = cluster.NewSet(local, cluster.Options{}); err != nil {
		t.Fatal(err)
	}
	g.wanted["edge-1"] = cluster.Target{Name: "edge-1", Source: "test", Config: cfg}
	return g, edge
}

// gateRig is a Gate over a Set that does not run, with one controller
// whose informers of cluster edge-1 synced.
func gateRig(t *testing.T) (*Gate, *flowLog) {
	t.Helper()
	g, edge := newGate(t)
	f := &flowLog{}
	s := binding.New("cms", func(c *cluster.Cluster) (*binding.Binding, error) {
		return &binding.Binding{Cluster: c, Sources: []binding.Source{syncedSource{}}}, nil
	}, f, logr.Discard(), nil, g.reg)
	s.Start(t.Context())
	s.Engaged(edge)
	if err := g.reg.Synced(t.Context(), "edge-1"); err != nil {
		t.Fatal(err)
	}
	return g, f
}

func TestALateQuiesceDoesNotHoldTheNextHoldingsKeys(t *testing.T) {
	// The ring hands edge-1 over (Serve off for the old holding) while it
	// claims it again: Drop of the old holding and the new claim must come
	// before the quiesce's check or after its quiesce, never between, or
	// the new holding's keys would stay held until its own handover. The
	// re-claim is tried between the two: it runs there if it can (the lock
	// is free), else once the quiesce is done.
	g, f := gateRig(t)
	old, cancelOld := context.WithCancel(t.Context())
	if _, err := g.engage(old, "edge-1"); err != nil {
		t.Fatal(err)
	}
	reclaimed := make(chan struct{})
	reclaim := func() {
		defer close(reclaimed)
		cancelOld()
		g.Drop(old, "edge-1")
		if _, err := g.engage(t.Context(), "edge-1"); err != nil {
			t.Error(err)
		}
	}
	g.quiescing = func(string) {
		if !g.engaging.TryLock() {
			go reclaim()
			return
		}
		g.engaging.Unlock()
		reclaim()
	}
	g.Serve(old, "edge-1", false)
	<-reclaimed
	if f.get() != "resume edge-1" {
		t.Errorf("after a quiesce of the old holding and a re-claim the flow's last call is %q, want a resume", f.get())
	}

	// Adversarial: a quiesce of the current holding holds its keys.
	g.quiescing = nil
	g.Serve(t.Context(), "edge-1", false)
	if f.get() != "pause edge-1" {
		t.Errorf("after a quiesce of the current holding the flow's last call is %q, want a pause", f.get())
	}
}

// gogc reads the garbage collector's current GOGC.
func gogc() int {
	s := []runtimemetrics.Sample{{Name: "/gc/gogc:percent"}}
	runtimemetrics.Read(s)
	return int(s[0].Value.Uint64())
}

func TestAcquireBoundsTheHeapOnlyWhileTheInformersSyncAndNotForEver(t *testing.T) {
	// A cluster whose engagement does not come (its API server does not
	// answer) leaves GOGC alone; one engaged whose informers never sync (a
	// controller that could not watch it) lowers it for syncgc.MaxBound at
	// most. Time is the bubble's fake clock.
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	synctest.Test(t, func(t *testing.T) {
		g, edge := newGate(t)
		g.ring = &ring.Ring{SyncHeapRatio: 1.3}
		// A controller of many clusters that never binds edge-1.
		binding.New("cms", nil, &flowLog{}, logr.Discard(), nil, g.reg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- g.Acquire(ctx, "edge-1") }()
		synctest.Wait()
		if got := gogc(); got != 100 {
			t.Errorf("GOGC while the engagement waits is %d, want 100", got)
		}
		g.Engaged(edge)
		synctest.Wait()
		if got := gogc(); got != 30 {
			t.Errorf("GOGC while the informers sync is %d, want 30 (SyncHeapRatio 1.3)", got)
		}
		time.Sleep(syncgc.MaxBound)
		synctest.Wait()
		if got := gogc(); got != 100 {
			t.Errorf("GOGC once syncgc.MaxBound passed is %d, want 100 again", got)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire after its holding ended = %v, want context.Canceled", err)
		}
	})
}
