package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	clientworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// recordingQueue records what a controller asks of its queue.
type recordingQueue struct {
	mu          sync.Mutex
	calls       []string
	requeues    map[reconcile.Request]int
	afterDelays []time.Duration
}

func (q *recordingQueue) record(s string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, s)
}

func (q *recordingQueue) Add(reconcile.Request)       { q.record("add") }
func (q *recordingQueue) AddReplay(reconcile.Request) { q.record("add-background") }
func (q *recordingQueue) AddAfter(_ reconcile.Request, d time.Duration) {
	q.record("add-after")
	q.afterDelays = append(q.afterDelays, d)
}
func (q *recordingQueue) Postpone(_ reconcile.Request, d time.Duration) {
	q.record("postpone")
	q.afterDelays = append(q.afterDelays, d)
}
func (q *recordingQueue) AddRateLimited(r reconcile.Request) {
	q.record("add-rate-limited")
	q.requeues[r]++
}
func (q *recordingQueue) Forget(r reconcile.Request) {
	q.record("forget")
	delete(q.requeues, r)
}
func (q *recordingQueue) NumRequeues(r reconcile.Request) int { return q.requeues[r] }
func (q *recordingQueue) GetWithReason() (reconcile.Request, reconcile.Reason, bool) {
	return reconcile.Request{}, "", true
}
func (q *recordingQueue) Done(reconcile.Request) { q.record("done") }
func (q *recordingQueue) Len() int               { return 0 }
func (q *recordingQueue) ShutDown()              {}
func (q *recordingQueue) Stats() workqueue.Stats { return workqueue.Stats{} }
func (q *recordingQueue) Inspect(reconcile.Request) workqueue.KeyState {
	return workqueue.KeyState{}
}
func (q *recordingQueue) Keys(int, int) []workqueue.QueuedKey[reconcile.Request] { return nil }

// logLines collects funcr output.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{LogCaller: funcr.All, Verbosity: 0})
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func newTestController(t *testing.T, r reconcile.Reconciler, timeout time.Duration) (*Controller, *recordingQueue, *logLines, *metrics.Metrics) {
	t.Helper()
	logs := &logLines{}
	m := metrics.New()
	q := &recordingQueue{requeues: map[reconcile.Request]int{}}
	log := logs.logger()
	c := &Controller{
		name:       "test",
		mgr:        &Manager{}, // no election: writes and keys allowed
		opts:       ControllerOptions{Workers: 1, ReconcileTimeout: timeout},
		queue:      q,
		reconciler: r,
		log:        log.WithValues("controller", "test"),
		deeper:     reconcilelog.Deeper(log.GetSink()),
		metrics:    m.ForController("test", 1),
		history:    history.New(0),
	}
	return c, q, logs, m
}

func TestReconcileOutcomes(t *testing.T) {
	req := reconcile.Request{Namespace: "ns", Name: "obj"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		fn        reconcile.Func
		timeout   time.Duration
		calls     []string
		result    string
		logged    []string // substrings of the single expected error line, if any
		afterWant time.Duration
		timedOut  bool
	}{
		{
			name:   "success forgets the key",
			fn:     func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil },
			calls:  []string{"forget"},
			result: metrics.ResultSuccess,
		},
		{
			name: "requeue after forgets and re-adds after the delay",
			fn: func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{RequeueAfter: 42 * time.Second}, nil
			},
			calls:     []string{"forget", "add-after"},
			result:    metrics.ResultRequeueAfter,
			afterWant: 42 * time.Second,
		},
		{
			name: "error backs off and ignores the result",
			fn: func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{RequeueAfter: time.Hour}, boom
			},
			calls:  []string{"add-rate-limited"},
			result: metrics.ResultError,
			logged: []string{"reconcile failed; retrying with backoff", "boom", `"retries"=0`},
		},
		{
			name: "terminal error forgets and does not retry",
			fn: func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{}, reconcile.Terminal(boom)
			},
			calls:  []string{"forget"},
			result: metrics.ResultTerminal,
			logged: []string{"not retrying", "terminal error: boom"},
		},
		{
			name: "panic is recovered, logged with its stack and retried",
			fn: func(context.Context, reconcile.Request) (reconcile.Result, error) {
				panic("kaboom")
			},
			calls:  []string{"add-rate-limited"},
			result: metrics.ResultPanic,
			logged: []string{"reconcile panicked", "panic: kaboom", "controller_internal_test.go"},
		},
		{
			name:    "timeout cancels the context and is counted",
			timeout: time.Millisecond,
			fn: func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
				<-ctx.Done()
				return reconcile.Result{}, ctx.Err()
			},
			calls:    []string{"add-rate-limited"},
			result:   metrics.ResultError,
			logged:   []string{"context deadline exceeded"},
			timedOut: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, q, logs, m := newTestController(t, tc.fn, tc.timeout)
			c.reconcileOne(t.Context(), req, reconcile.ReasonChange, 1)

			if strings.Join(q.calls, ",") != strings.Join(tc.calls, ",") {
				t.Errorf("queue calls = %v, want %v", q.calls, tc.calls)
			}
			if tc.afterWant != 0 && (len(q.afterDelays) != 1 || q.afterDelays[0] != tc.afterWant) {
				t.Errorf("AddAfter delays = %v, want [%v]", q.afterDelays, tc.afterWant)
			}
			// controller-runtime's labels: terminal errors and panics are "error".
			label := map[string]string{metrics.ResultTerminal: "error", metrics.ResultPanic: "error"}[tc.result]
			if label == "" {
				label = tc.result
			}
			for _, r := range []string{"success", "error", "requeue", "requeue_after"} {
				want := 0.0
				if r == label {
					want = 1
				}
				if got := counter(t, m.Registry, "controller_runtime_reconcile_total", "controller", "test", "result", r); got != want {
					t.Errorf("reconcile_total{result=%q} = %v, want %v", r, got, want)
				}
			}
			if got, want := counter(t, m.Registry, "controller_runtime_reconcile_panics_total", "controller", "test"), b2f(tc.result == metrics.ResultPanic); got != want {
				t.Errorf("panics_total = %v, want %v", got, want)
			}
			if got, want := counter(t, m.Registry, "controller_runtime_terminal_reconcile_errors_total", "controller", "test"), b2f(tc.result == metrics.ResultTerminal); got != want {
				t.Errorf("terminal_reconcile_errors_total = %v, want %v", got, want)
			}
			if got, want := counter(t, m.Registry, "controller_runtime_reconcile_errors_total", "controller", "test"), b2f(label == "error"); got != want {
				t.Errorf("reconcile_errors_total = %v, want %v", got, want)
			}
			if got, want := counter(t, m.Registry, "converge_reconcile_timeouts_total", "controller", "test"), b2f(tc.timedOut); got != want {
				t.Errorf("timeouts_total = %v, want %v", got, want)
			}
			var errLines []string
			for _, l := range logs.all() {
				if strings.Contains(l, `"error"=`) || strings.Contains(l, `"err"=`) {
					errLines = append(errLines, l)
				}
			}
			if len(tc.logged) == 0 && len(errLines) != 0 {
				t.Errorf("error lines logged on %s: %v", tc.result, errLines)
			}
			if len(tc.logged) > 0 {
				if len(errLines) != 1 {
					t.Fatalf("want exactly one error line (logged once), got %d: %v", len(errLines), errLines)
				}
				for _, s := range tc.logged {
					if !strings.Contains(errLines[0], s) {
						t.Errorf("error line %q lacks %q", errLines[0], s)
					}
				}
			}
		})
	}
}

// counter is the value of the counter name in reg whose labels include
// the name-value pairs labels; it fails t when reg has no such series.
func counter(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestReconcileLoggerCarriesObjectAndID(t *testing.T) {
	var ids []string
	c, _, logs, _ := newTestController(t, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		logr.FromContextOrDiscard(ctx).Info("hello", "k", "v")
		return reconcile.Result{}, nil
	}), 0)
	c.reconcileOne(t.Context(), reconcile.Request{Namespace: "ns", Name: "a"}, reconcile.ReasonChange, 1)
	c.reconcileOne(t.Context(), reconcile.Request{Name: "cluster-scoped"}, reconcile.ReasonChange, 1)
	lines := logs.all()
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %v", len(lines), lines)
	}
	for i, want := range [][]string{
		{`"controller"="test"`, `"namespace"="ns"`, `"name"="a"`, `"k"="v"`, `"reconcileID"=`},
		{`"controller"="test"`, `"name"="cluster-scoped"`, `"reconcileID"=`},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %s", i, lines[i], w)
			}
		}
		// The caller is the reconciler, not the framework's log sink.
		if !strings.Contains(lines[i], "controller_internal_test.go") {
			t.Errorf("line %d %q does not name the caller's file", i, lines[i])
		}
		ids = append(ids, lines[i][strings.Index(lines[i], `"reconcileID"=`):])
	}
	if strings.Contains(lines[1], `"namespace"`) {
		t.Errorf("cluster-scoped object logged with a namespace: %q", lines[1])
	}
	if ids[0] == ids[1] {
		t.Errorf("two reconciles share a reconcile ID: %v", ids)
	}
}

// The reason a key was queued for reaches the reconcile's log lines (also
// through a logger the reconciler derives), converge_reconciles_total and
// ReasonFrom, through the controller's real worker loop and queue.
func TestReconcileReasonInLogsMetricsAndContext(t *testing.T) {
	seen := map[string]reconcile.Reason{}
	c, _, logs, m := newTestController(t, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		seen[req.Name] = ReasonFrom(ctx)
		log := logr.FromContextOrDiscard(ctx)
		log.Info("plain")
		log.WithValues("k", "v").WithName("sub").Info("derived")
		return reconcile.Result{}, nil
	}), 0)
	q := workqueue.New(workqueue.Options[reconcile.Request]{
		RateLimiter: clientworkqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](0, 0), // retries at once
	})
	c.queue = q
	// Each name is queued for the reasons listed; the reconcile reports the
	// most significant.
	want := map[string]reconcile.Reason{
		"changed":  reconcile.ReasonChange,
		"replayed": reconcile.ReasonReplay,
		"retried":  reconcile.ReasonRetry,
		"requeued": reconcile.ReasonRequeue,
		"both":     reconcile.ReasonChange,
	}
	q.Add(reconcile.Request{Name: "changed"})
	q.AddReplay(reconcile.Request{Name: "replayed"})
	q.AddRateLimited(reconcile.Request{Name: "retried"})
	q.AddAfter(reconcile.Request{Name: "requeued"}, 0)
	q.AddReplay(reconcile.Request{Name: "both"})
	q.Add(reconcile.Request{Name: "both"})
	q.ShutDown()             // Get hands out what is queued, then reports shutdown
	c.worker(t.Context(), 1) // returns once the queue is empty

	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("ReasonFrom = %v, want %v", seen, want)
	}
	lines := logs.all()
	for name, reason := range want {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, `"name"="`+name+`"`) {
				n++
				if !strings.Contains(l, `"reason"="`+string(reason)+`"`) {
					t.Errorf("line %q lacks reason %q", l, reason)
				}
			}
		}
		if n != 2 {
			t.Errorf("%d lines for %s, want 2 (plain and derived): %v", n, name, lines)
		}
	}
	counts := map[reconcile.Reason]float64{reconcile.ReasonChange: 2, reconcile.ReasonReplay: 1, reconcile.ReasonRetry: 1, reconcile.ReasonRequeue: 1}
	for reason, wantN := range counts {
		if got := counter(t, m.Registry, "converge_reconciles_total", "controller", "test", "reason", string(reason)); got != wantN {
			t.Errorf("converge_reconciles_total{reason=%q} = %v, want %v", reason, got, wantN)
		}
	}
	if r := ReasonFrom(t.Context()); r != "" {
		t.Errorf("ReasonFrom outside a reconcile = %q, want empty", r)
	}
}
