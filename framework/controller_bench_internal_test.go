package framework

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

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
				mgr:   &Manager{},
				opts:  ControllerOptions{Workers: 1},
				queue: nopQueue{},
				reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}),
				log:     log,
				deeper:  reconcilelog.Deeper(log.GetSink()),
				metrics: metrics.New().ForController("bench", 1),
				history: history.New(bc.historyKeys),
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
