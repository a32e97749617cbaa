package framework

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/framework/internal/history"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/framework/internal/shard"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// ControllerOptions configures a controller. The zero value is a valid
// configuration.
type ControllerOptions struct {
	// Workers is how many keys are reconciled at once. A key is never
	// reconciled by two workers at once, whatever this is. Zero means 1.
	Workers int

	// RateLimiter decides how long a failing key waits before its retry.
	// Zero means per-key exponential backoff from 5 ms doubling to 1000 s,
	// combined with an overall token bucket of 10 retries per second (burst 100).
	RateLimiter clientworkqueue.TypedRateLimiter[reconcile.Request]

	// Selection narrows the primary objects the controller watches (a
	// namespace, label or field selectors). Zero means the manager cache's
	// default for the kind.
	Selection informers.Selection

	// ResyncPeriod replays every cached object of the primary kind to this
	// controller at this interval, so that it reconciles each again without
	// any change: a safety net for controllers that act on the outside
	// world. Replayed keys are queued behind real changes (Change.Replay
	// is true), and only this controller's listener replays: other
	// controllers sharing the informer keep their own period. It must be at
	// least informers.MinResyncPeriod. Zero means the cache's period for the
	// kind (Options.Cache.ResyncByKind, else Options.Cache.ResyncPeriod);
	// negative means no resync for this controller.
	ResyncPeriod time.Duration

	// ReconcileTimeout bounds each reconcile: its context is cancelled after
	// this long and the reconcile is counted as timed out. Zero means no bound.
	ReconcileTimeout time.Duration

	// Logger is the controller's logger. Zero means the manager's. Since
	// logr.Discard() is the zero logr.Logger, it too selects the manager's:
	// to silence one controller, pass
	// logr.FromSlogHandler(slog.DiscardHandler).
	Logger logr.Logger

	// WithoutLeaderElection runs the controller in every process, leader or
	// not (for controllers whose work is per process). Zero (false) means it
	// runs only in the leader when leader election is on.
	WithoutLeaderElection bool

	// Sharded spreads the controller's objects over the members of the
	// manager's sharding ring (Options.Sharding): this process caches and
	// reconciles only the objects of the primary kind in the buckets it
	// holds, and its reconciles' writes are refused once their bucket is
	// given up (sharding.ErrBucketNotHeld). When the ring shards by namespace, the
	// namespaced kinds of its Owned and OwnedByAny sources (Owns) and of
	// Map sources marked SameNamespace are read per held bucket too, so a
	// member caches the children of its parents only; other sources are
	// cached whole.
	//
	// Reads through the manager's cache of a kind read per bucket, in the
	// selection and mode the controller reads it with (Selection, a
	// source's WithSelection), by any reader in the process, go to the
	// held buckets (an object of another bucket is ErrNotCached), unless
	// something made an informer of the whole kind, which they read
	// instead. Reads in another selection or mode make an informer of
	// their own, as they would unsharded.
	//
	// Keys that sources map to an object of a bucket held elsewhere are
	// dropped here: that member reconciles them. A sharded controller runs
	// in every member, leader or not. It needs Options.Sharding.Ring and
	// must be built before Manager.Start. Zero (false) means the
	// controller reconciles every object (in the leader, with leader
	// election).
	Sharded bool

	// Clusters says which of the manager's engaged clusters (package
	// cluster) the controller watches and reconciles. With Remote, each
	// engaged cluster's keys form a flow of the queue (workqueue.Options.
	// Flow): a cluster's keys wait until its informers synced, workers
	// hold at most max(1, Workers-1) keys of one cluster at once so
	// another cluster always gets a worker, and a disengaged cluster's
	// keys are dropped. A reconcile finds its cluster with cluster.From,
	// and runs on a context cancelled when that cluster is disengaged. It
	// cannot be combined with Sharded. When Options.Sharding.Clusters
	// spreads the clusters, a Remote controller runs in every member, and
	// its keys of the manager's own cluster (no Request.Cluster) wait in
	// their flow until this process leads: with leader election, one live
	// member reconciles them; without it (or WithoutLeaderElection), every
	// member does. Zero means the manager's own cluster only.
	Clusters cluster.Scope

	// HistoryKeys is how many keys the controller remembers the last five
	// reconciles of (start, duration, reason, result, error text cut to 512
	// bytes, requeue-after, NoteBlocked's Blocker), for the manager's debug
	// endpoint and converge explain. The keys are slots of a fixed array
	// recycled least recently reconciled first, so the memory is bounded
	// however many objects the controller sees; a slot grows with its key's
	// reconciles up to five records: about 0.4 KB per key reconciled once
	// (0.4 MB for the default), 0.85 KB with five records, 3.4 KB when
	// every record holds a long error. A disengaged cluster's keys leave
	// it at once. Zero means 1024 keys; negative means
	// none (the debug endpoint still shows queues, in-flight keys and
	// rates).
	HistoryKeys int
}

func (o ControllerOptions) withDefaults(m *Manager) ControllerOptions {
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Logger.GetSink() == nil {
		o.Logger = m.log
	}
	return o
}

func (o ControllerOptions) validate() error {
	var errs []error
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("ControllerOptions.Workers must not be negative, got %d", o.Workers))
	}
	if o.ResyncPeriod > 0 && o.ResyncPeriod < informers.MinResyncPeriod {
		errs = append(errs, fmt.Errorf("ControllerOptions.ResyncPeriod must be at least %v (or negative for none), got %v", informers.MinResyncPeriod, o.ResyncPeriod))
	}
	if o.Clusters.OnEngaged != nil && !o.Clusters.Remote {
		errs = append(errs, errors.New("ControllerOptions.Clusters.OnEngaged is set without Clusters.Remote: a controller of the manager's own cluster hears of no engagement"))
	}
	if o.Sharded && o.Clusters.Remote {
		errs = append(errs, errors.New("ControllerOptions.Sharded and Clusters.Remote cannot be combined: a sharded controller reads the manager's own cluster only"))
	}
	if o.ReconcileTimeout < 0 {
		errs = append(errs, fmt.Errorf("ControllerOptions.ReconcileTimeout must not be negative, got %v", o.ReconcileTimeout))
	}
	return errors.Join(errs...)
}

// Controller reconciles objects of one kind: it watches its sources, queues
// the keys their events map to, and runs the reconciler on them with
// ControllerOptions.Workers workers. Wire one with NewBuilder and Complete;
// Builder.Build also returns it.
//
// A controller is a Runnable the manager starts; it runs once.
type Controller struct {
	name       string
	mgr        *Manager
	opts       ControllerOptions
	kind       schema.GroupVersionKind
	queue      queue
	reconciler reconcile.Reconciler
	sources    []boundSource
	// watched holds the kinds of the sources but the controller's own, for
	// the debug endpoint; set by the builder.
	watched []schema.GroupVersionKind
	log     logr.Logger
	deeper  logr.LogSink
	metrics *metrics.Controller
	tracer  trace.Tracer // nil: no tracing

	// ids numbers reconciles for logs.
	ids atomic.Uint64
	// stopping is set when Start's context ends: workers stop taking keys.
	stopping atomic.Bool
	// started guards against a second Start.
	started atomic.Bool

	// phase is where the controller is in its life (see controllerPhase).
	phase atomic.Int32
	// history holds the last reconciles of recently reconciled keys.
	history *history.History
	// primary is the informer of the kind the controller reconciles;
	// listeners are its sources' listeners, set before phaseRunning.
	primary   primaryInformer
	listeners []syncgc.Listener
	// shard gates the dispatch of a sharded controller's keys; nil when not
	// sharded.
	shard *gate

	mu sync.Mutex
	// inflight holds the reconciles running now, by ID; mu guards it.
	inflight map[uint64]inflightReconcile

	// local is the manager's own cluster, which From returns in its
	// reconciles; set by the builder.
	local *cluster.Cluster
	// remote are the controller's bindings to the engaged clusters other
	// than the manager's own; nil unless ControllerOptions.Clusters.Remote.
	remote *binding.Set
}

// inflightReconcile is a reconcile that has begun and not returned.
type inflightReconcile struct {
	req    reconcile.Request
	begun  time.Time
	worker int
}

// queue is what a controller needs of its work queue; *workqueue.Queue is
// the implementation, tests substitute a recorder.
type queue interface {
	workqueue.Enqueuer[reconcile.Request]
	AddRateLimited(reconcile.Request)
	Postpone(reconcile.Request, time.Duration)
	Forget(reconcile.Request)
	NumRequeues(reconcile.Request) int
	GetWithReason() (reconcile.Request, reconcile.Reason, bool)
	Done(reconcile.Request)
	Len() int
	ShutDown()
	Stats() workqueue.Stats
	Inspect(reconcile.Request) workqueue.KeyState
	Keys(offset, limit int) []workqueue.QueuedKey[reconcile.Request]
}

var _ queue = (*workqueue.Queue[reconcile.Request])(nil)

// release stops the queue of a controller that never started (its manager
// stopped first), so that none of its goroutines outlive the manager; a
// later Start fails.
func (c *Controller) release() {
	if c.started.CompareAndSwap(false, true) {
		c.queue.ShutDown()
	}
}

// NeedLeaderElection reports whether the controller runs only in the leader.
// A controller of every cluster (Clusters.Remote) in a manager that spreads
// clusters (sharding.Options.Clusters) runs in every member: only its keys
// of the manager's own cluster wait for leadership (see leads).
func (c *Controller) NeedLeaderElection() bool {
	return !c.opts.WithoutLeaderElection && !c.opts.Sharded && c.leads() == nil
}

// leads is Manager.Elected when the controller's keys of the manager's own
// cluster ("") wait, in their paused flow, until this process leads; nil
// when they do not.
func (c *Controller) leads() <-chan struct{} {
	if c.opts.Clusters.Remote && !c.opts.WithoutLeaderElection && c.mgr.gate != nil {
		return c.mgr.elected
	}
	return nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Start registers the controller's event listeners, waits for the informers
// it reads to sync, and runs its workers until ctx is done. Then it stops
// taking keys and waits for in-flight reconciles, whose contexts stay alive
// for the manager's graceful shutdown timeout and are then cancelled.
// Reconciles still running CancelGrace after that are abandoned:
// each is logged with its key, and Start returns an error wrapping
// ErrNotStopped that names them.
func (c *Controller) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return fmt.Errorf("controller %q: already started", c.name)
	}
	defer c.queue.ShutDown() // also when Start returns before its workers run
	c.phase.Store(int32(phaseSyncing))
	defer c.phase.Store(int32(phaseStopped))
	c.remote.HoldLocal(ctx, c.leads())
	srcCtx := ctx
	if c.local != nil {
		srcCtx = cluster.NewContext(ctx, c.local)
	}
	for _, s := range c.sources {
		reg, err := s.start(srcCtx)
		if err != nil {
			return fmt.Errorf("controller %q: %w", c.name, err)
		}
		defer func() { _ = s.informer().RemoveListener(reg) }()
		c.listeners = append(c.listeners, reg)
	}
	for _, s := range c.sources {
		if err := s.informer().WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("controller %q: %w", c.name, err)
		}
	}

	if c.shard != nil {
		c.shard.Begin(ctx)
	}
	// Reconciles run on a context that outlives ctx by the drain timeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	c.phase.Store(int32(phaseRunning))
	for i := range c.opts.Workers {
		wg.Go(func() { c.worker(workCtx, i+1) })
	}
	if c.remote != nil {
		c.remote.Start(ctx)
	}
	c.log.Info("controller started", "workers", c.opts.Workers) // caches synced: the one line a healthy controller logs
	<-ctx.Done()

	if c.shard != nil {
		c.shard.Freeze() // what the queue owes, for the buckets' next holders
	}
	c.stopping.Store(true)
	c.queue.ShutDown()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	timer := time.NewTimer(c.mgr.drainTimeout())
	defer timer.Stop()
	select {
	case <-drained:
	case <-c.mgr.lost: // lost while draining: another process may lead already
	case <-timer.C:
	}
	select {
	case <-drained:
	default:
		if c.mgr.lostLeadership.Load() {
			c.log.Info("cancelling in-flight reconciles: leadership was lost")
		} else {
			c.log.Info("cancelling in-flight reconciles: graceful shutdown timeout reached", "timeout", c.mgr.drainTimeout())
		}
		cancelWork()
		grace := time.NewTimer(CancelGrace)
		defer grace.Stop()
		select {
		case <-drained:
		case <-grace.C:
			return c.abandon()
		}
	}
	c.log.V(1).Info("controller stopped")
	return nil
}

// abandon logs the reconciles still running and returns the error naming
// them; their workers are left behind.
func (c *Controller) abandon() error {
	c.mu.Lock()
	stuck := make([]inflightReconcile, 0, len(c.inflight))
	for _, r := range c.inflight {
		stuck = append(stuck, r)
	}
	c.mu.Unlock()
	sort.Slice(stuck, func(i, j int) bool { return stuck[i].begun.Before(stuck[j].begun) })
	keys := make([]string, 0, len(stuck))
	for _, r := range stuck {
		running := time.Since(r.begun).Round(time.Millisecond)
		c.log.Info("abandoning a reconcile that did not return after its context was cancelled; the manager's client refuses its writes",
			"key", r.req.String(), "running", running, "grace", CancelGrace)
		keys = append(keys, fmt.Sprintf("%s (running %v)", r.req, running))
	}
	return fmt.Errorf("controller %q: abandoned %d reconcile(s) still running %v after their context was cancelled: %s: %w",
		c.name, len(stuck), CancelGrace, strings.Join(keys, ", "), ErrNotStopped)
}

// worker reconciles keys until the queue shuts down; n numbers it from 1,
// for the debug endpoint.
func (c *Controller) worker(ctx context.Context, n int) {
	for {
		req, reason, shutdown := c.queue.GetWithReason()
		if shutdown {
			return
		}
		if c.stopping.Load() || c.NeedLeaderElection() && c.mgr.allowWrite() != nil {
			// Shutting down, or leadership lost (Start cancels us): leave
			// queued keys to whoever runs next (level-triggered).
			c.queue.Done(req)
			continue
		}
		c.dispatch(ctx, req, reason, n)
		c.queue.Done(req)
	}
}

// shardRetry is how soon a key of a bucket held here but not served yet
// (still syncing, or not renewed lately) is tried again.
const shardRetry = 100 * time.Millisecond

// dispatch reconciles req, unless the controller's gate says otherwise: a
// sharded controller reconciles req when its bucket is served here, on a
// context fenced by the bucket, and drops keys of buckets held elsewhere.
func (c *Controller) dispatch(ctx context.Context, req reconcile.Request, reason reconcile.Reason, worker int) {
	if req.Cluster != "" {
		// A key of another cluster: reconciled while the controller
		// watches that cluster, on a context that ends with its
		// engagement; dropped otherwise.
		ctx, done, ok := c.remote.Context(ctx, req.Cluster)
		defer done()
		if !ok {
			c.queue.Forget(req)
			return
		}
		c.reconcileOne(ctx, req, reason, worker)
		return
	}
	if c.local != nil {
		ctx = cluster.NewContext(ctx, c.local)
	}
	if c.shard != nil {
		gated, done, d := c.shard.Admit(ctx, req)
		switch d {
		case shard.DispatchDrop:
			c.queue.Forget(req)
			return
		case shard.DispatchWait:
			c.queue.Postpone(req, shardRetry) // a replay stays a replay
			return
		}
		defer done()
		ctx = gated
	}
	c.reconcileOne(ctx, req, reason, worker)
}

// reconcileOne runs the reconciler for req, queued for reason, on worker n,
// acts on the outcome, as the reconcile package documentation's table says,
// and records it in the history.
func (c *Controller) reconcileOne(ctx context.Context, req reconcile.Request, reason reconcile.Reason, worker int) {
	id := c.ids.Add(1)
	rc := &reconcilelog.Context{Sink: reconcilelog.Sink{Base: c.log.GetSink(), Deeper: c.deeper, Controller: c.name, Req: req, ID: id, Reason: reason}}
	sink := &rc.Sink
	log := logr.New(sink)
	rc.Context = logr.NewContext(ctx, log)
	ctx = rc
	if c.opts.ReconcileTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.ReconcileTimeout)
		defer cancel()
	}
	ctx, span := c.startSpan(ctx, req, id, reason)
	if span != nil {
		defer span.End()
	}
	start := time.Now()
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[uint64]inflightReconcile{}
	}
	c.inflight[id] = inflightReconcile{req: req, begun: start, worker: worker}
	// The active gauge is set under mu, which the reconcile takes anyway:
	// a store, not the compare-and-swap loop of Inc and Dec that workers
	// would contend on.
	c.metrics.Active.Set(float64(len(c.inflight)))
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.metrics.Active.Set(float64(len(c.inflight)))
		c.mu.Unlock()
	}()
	res, err, panicked := reconcilelog.Call(ctx, c.reconciler, req)
	took := time.Since(start)
	timedOut := c.opts.ReconcileTimeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded)

	result, retries := c.settle(log, req, res, err, panicked)
	if timedOut {
		log.Info("reconcile ran past its timeout", "timeout", c.opts.ReconcileTimeout)
	}
	c.metrics.Observe(req.Cluster, result, reason, took, timedOut)
	rec := history.Record{Start: start, Took: took, RequeueAfter: res.RequeueAfter, Retries: retries, Worker: worker, Reason: reason, Result: result}
	if err != nil {
		// Shown by the debug endpoint, its page and converge explain:
		// without the values the API server quotes, on one line.
		rec.Err = errtext.Of(err)
	}
	if b := sink.Blocked.Load(); b != nil {
		rec.Blocked = b
	}
	c.history.Record(req, rec)
	if span != nil {
		span.SetAttributes(attribute.String("converge.result", result))
		if err != nil {
			span.RecordError(errtext.Error(err))
			span.SetStatus(codes.Error, rec.Err)
		}
	}
	if v := log.V(5); v.Enabled() {
		v.Info("reconciled", "result", result, "duration", took)
	}
}

// startSpan starts the span of reconcile id of req, when the manager has a
// tracer; span is nil otherwise.
func (c *Controller) startSpan(ctx context.Context, req reconcile.Request, id uint64, reason reconcile.Reason) (_ context.Context, span trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "reconcile "+c.name, trace.WithAttributes(
		attribute.String("converge.controller", c.name),
		attribute.String("converge.namespace", req.Namespace),
		attribute.String("converge.name", req.Name),
		attribute.Int64("converge.reconcile_id", int64(id)),
		attribute.String("converge.reason", string(reason)),
	))
}

// settle acts on the outcome of a reconcile of req, as the reconcile
// package documentation's table says: it forgets req, queues it again after
// res.RequeueAfter, or retries it with backoff. It returns the outcome's
// metric label and the retries so far.
func (c *Controller) settle(log logr.Logger, req reconcile.Request, res reconcile.Result, err error, panicked bool) (result string, retries int) {
	switch {
	case panicked:
		c.queue.AddRateLimited(req)
		return metrics.ResultPanic, c.queue.NumRequeues(req)
	case err != nil && reconcile.IsTerminal(err):
		log.Error(errtext.Error(err), "reconcile failed; not retrying until the object changes")
		c.queue.Forget(req)
		return metrics.ResultTerminal, 0
	case err != nil && req.Cluster != "" && c.remote.Get(req.Cluster) == nil:
		log.Error(errtext.Error(err), "reconcile failed, and its cluster was disengaged meanwhile: the key is dropped, not retried")
		c.queue.Forget(req)
		return metrics.ResultError, 0
	case err != nil:
		retries = c.queue.NumRequeues(req)
		log.Error(errtext.Error(err), "reconcile failed; retrying with backoff", "retries", retries)
		c.queue.AddRateLimited(req)
		return metrics.ResultError, retries + 1
	case res.RequeueAfter > 0:
		c.queue.Forget(req)
		c.queue.AddAfter(req, res.RequeueAfter)
		return metrics.ResultRequeueAfter, 0
	default:
		c.queue.Forget(req)
		return metrics.ResultSuccess, 0
	}
}

// QueueLen returns the number of keys waiting to be reconciled.
func (c *Controller) QueueLen() int { return c.queue.Len() }

// ReasonFrom returns why the reconcile whose context is ctx runs: change (a
// watched object changed), replay (the cache's initial list or a periodic
// resync, with no change), retry (after a failed reconcile) or requeue (after
// Result.RequeueAfter). When the key was queued for several reasons before a
// worker took it, it is the most significant (see reconcile.Reason). It
// returns "" when ctx does not come from a controller's reconcile.
//
// The reason is for logs, metrics and tuning (say, skipping an expensive
// external check on a replay); reconcilers stay level-triggered and must not
// depend on it for correctness. The same value is in the reconcile's log
// lines (reason=...) and in converge_reconciles_total.
func ReasonFrom(ctx context.Context) reconcile.Reason {
	if s := reconcilelog.From(ctx); s != nil {
		return s.Reason
	}
	return ""
}
