package framework_test

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
	"github.com/go-logr/logr"
)

// idleHeapProfile is a folder for heap profiles of the idle managers of
// BenchmarkIdleManagerHeap, taken when their heap is read (run with
// -test.memprofilerate=1 for every allocation).
var idleHeapProfile = flag.String("idleheap.profile", "", "BenchmarkIdleManagerHeap: write the idle managers' heap profiles to this folder")

// liveHeap is the heap in use after two collections, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIdleManagerHeap reports what a started, synced and idle manager
// with one ConfigMap controller holds on the heap (manager-B: after a GC,
// less the heap before NewManager), on framework/fake with no objects:
// the part of a process's heap that does not depend on how many objects it
// caches. init-B is the heap after a GC before the first manager, that is
// package initialisation and the fake API server (the same for every run of
// one test binary). ring is the same manager as the only member of a
// sharding ring, serving every bucket. For the profile:
//
//	go test ./framework -run '^$' -bench IdleManagerHeap -benchtime 1x \
//	  -memprofilerate 1 -args -idleheap.profile=/tmp/idle
//	go tool pprof -sample_index inuse_space -top /tmp/idle/ring.pprof
func BenchmarkIdleManagerHeap(b *testing.B) {
	for _, ring := range []bool{false, true} {
		name := "unsharded"
		if ring {
			name = "ring"
		}
		b.Run(name, func(b *testing.B) {
			srv := fake.Start(b, fake.Options{})
			init := liveHeap()
			var held uint64
			for range b.N {
				held = idleManagerHeap(b, srv, ring) - init
			}
			b.ReportMetric(float64(held), "manager-B")
			b.ReportMetric(float64(init), "init-B")
		})
	}
}

// idleManagerHeap starts a manager on srv, waits until it has synced (and,
// with ring, serves every bucket), and returns the live heap then.
func idleManagerHeap(b *testing.B, srv *fake.Server, ring bool) uint64 {
	opts := framework.Options{Logger: logr.FromSlogHandler(slog.DiscardHandler)}
	if ring {
		opts.Sharding = sharding.Options{Ring: "idle", Lease: lease.Options{Namespace: "default", Identity: "member-0"}}
	}
	mgr, err := framework.NewManager(srv.Config(), opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "configmaps", framework.ControllerOptions{Sharded: ring}).
		CompleteByKey(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		})); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	if err := mgr.Cache().WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	for ring {
		st, _ := mgr.RingStatus()
		if len(st.Serving) == st.Buckets.Count {
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case err := <-done:
			b.Fatalf("Start returned before the ring settled: %v", err)
		}
	}
	// A moment for the goroutines Start began to reach their idle state.
	time.Sleep(200 * time.Millisecond)
	heap := liveHeap()
	if dir := *idleHeapProfile; dir != "" {
		name := "unsharded.pprof"
		if ring {
			name = "ring.pprof"
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	return heap
}
