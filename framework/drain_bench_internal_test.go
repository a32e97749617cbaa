//go:build unix

package framework

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// BenchmarkDrain is a controller's backlog path, per key: an update event
// for each of a batch of distinct ConfigMaps, delivered on one goroutine as
// an informer delivers them, through the primary source's listener into
// the controller's work queue (with the manager's queue metrics), and the
// workers' hand-off of each key to a reconciler that does nothing, until
// every key of the batch is reconciled. It is what the bench's backlog drain
// costs converge beyond the cache read and the report, at 1, 2 and 4
// workers.
//
// Besides ns/key (wall time, which other processes on the machine inflate)
// it reports cpu-ns/key, the CPU time of the whole process per key, and
// allocs/key.
func BenchmarkDrain(b *testing.B) {
	const batch = 1024
	olds := make([]*corev1.ConfigMap, batch)
	news := make([]*corev1.ConfigMap, batch)
	for i := range batch {
		meta := metav1.ObjectMeta{Namespace: "bench", Name: "cm-" + strconv.Itoa(i), ResourceVersion: strconv.Itoa(2 * i)}
		olds[i] = &corev1.ConfigMap{ObjectMeta: meta}
		meta.ResourceVersion = strconv.Itoa(2*i + 1)
		news[i] = &corev1.ConfigMap{ObjectMeta: meta}
	}
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var reconciled sync.WaitGroup
			log := logr.FromSlogHandler(slog.DiscardHandler)
			m := metrics.New()
			q := workqueue.New(workqueue.Options[reconcile.Request]{Name: "bench", MetricsProvider: m.Queue})
			c := &Controller{
				name:  "bench",
				mgr:   &Manager{},
				opts:  ControllerOptions{Workers: workers},
				queue: q,
				reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					reconciled.Done()
					return reconcile.Result{}, nil
				}),
				log:     log,
				deeper:  reconcilelog.Deeper(log.GetSink()),
				metrics: m.ForController("bench", workers),
				history: history.New(0),
			}
			w := &watchTarget{owner: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, queue: q}
			h := asListener(benchSource(&kindSource[*corev1.ConfigMap]{self: true}, w, nil).listener(b.Context()))
			var running sync.WaitGroup
			for i := range workers {
				running.Go(func() { c.worker(b.Context(), i+1) })
			}
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu := processCPU()
			for b.Loop() {
				reconciled.Add(batch)
				for i := range batch {
					deliverUpdate(h, olds[i], news[i])
				}
				reconciled.Wait()
			}
			cpu = processCPU() - cpu
			runtime.ReadMemStats(&after)
			keys := float64(b.N * batch)
			b.ReportMetric(float64(cpu.Nanoseconds())/keys, "cpu-ns/key")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/keys, "ns/key")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/keys, "allocs/key")
			q.ShutDown()
			running.Wait()
		})
	}
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
