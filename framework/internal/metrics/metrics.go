// Package metrics holds the Prometheus series a manager exports: its
// reconciles per controller (outcome, reason, duration, workers), its work
// queues (client-go's workqueue MetricsProvider), its shared cache (objects
// and estimated bytes per informer and kind, failed requests, informers a
// read of an unwatched kind started), its leader lease and client-go's REST
// requests; and, for the clusters a manager's providers engage, their
// engagement, health and cache and their reconciles (converge_cluster_*).
// Names, labels and help texts are controller-runtime's, so existing
// dashboards and alerts keep working; the series converge adds use the
// converge_ prefix. Package framework wires them (Manager.Metrics).
package metrics

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// Reconcile outcomes, as logs, spans and the history name them; all but
// ResultTerminal and ResultPanic are also values of
// controller_runtime_reconcile_total's "result" label.
const (
	ResultSuccess      = "success"
	ResultRequeueAfter = "requeue_after"
	ResultError        = "error"
	ResultTerminal     = "terminal"
	ResultPanic        = "panic"
)

// resultLabels are the values of controller_runtime_reconcile_total's
// "result" label: controller-runtime's, so its dashboards keep working.
// "requeue" (controller-runtime's Result.Requeue) has no converge
// equivalent and stays 0; it is exported so queries over all four find it.
var resultLabels = []string{ResultSuccess, ResultError, "requeue", ResultRequeueAfter}

// reasonLabels are the values of converge_reconciles_total's "reason"
// label, exported from the start so queries over all of them find each.
var reasonLabels = []reconcile.Reason{reconcile.ReasonChange, reconcile.ReasonReplay, reconcile.ReasonRetry, reconcile.ReasonRequeue}

// reconcileBuckets are the buckets of the reconcile time histograms:
// controller-runtime's.
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// resultLabel maps an outcome to its "result" label: as in
// controller-runtime, terminal errors and panics count as "error" there,
// and have series of their own (terminal_reconcile_errors_total,
// reconcile_panics_total).
func resultLabel(result string) string {
	switch result {
	case ResultTerminal, ResultPanic:
		return ResultError
	}
	return result
}

// Metrics holds the series one manager exports. Names and labels follow
// controller-runtime's, so existing dashboards and alerts keep working; the
// series converge adds use the converge_ prefix.
type Metrics struct {
	// Registry holds every series (Manager.Metrics returns it).
	Registry *prometheus.Registry
	// Queue is the work queues' MetricsProvider.
	Queue *Queue
	// LeaderStatus is 1 while the process holds the leader lease its
	// label names.
	LeaderStatus *prometheus.GaugeVec
	// CacheErrors counts the shared cache's failed list and watch requests.
	CacheErrors *prometheus.CounterVec
	// CacheStats and SharedBytes are the shared cache's, read at scrape
	// time; until set, the cache's series are empty.
	CacheStats  func() []informers.InformerStats
	SharedBytes func() int64

	reconcileTotal     *prometheus.CounterVec
	reconcileErrors    *prometheus.CounterVec
	reconcileTerminal  *prometheus.CounterVec
	reconcilePanics    *prometheus.CounterVec
	reconcileTimeouts  *prometheus.CounterVec
	reconcilesByReason *prometheus.CounterVec
	reconcileTime      *prometheus.HistogramVec
	workersMax         *prometheus.GaugeVec
	workersActive      *prometheus.GaugeVec
	cacheObjects       *prometheus.Desc
	cacheBytes         *prometheus.Desc
	informerObjects    *prometheus.Desc
	informerBytes      *prometheus.Desc
	sharedBytes        *prometheus.Desc
	readStarts         *prometheus.CounterVec

	// Clusters returns the clusters the providers engaged or tried to,
	// read at scrape time for the converge_cluster_* gauges; until set,
	// there are none.
	Clusters func() []Cluster

	clusterReconciles *prometheus.CounterVec
	clusterTime       *prometheus.HistogramVec
	clusterEngaged    *prometheus.Desc
	clusterHealthy    *prometheus.Desc
	clusterObjects    *prometheus.Desc
	clusterBytes      *prometheus.Desc
	// gone holds the names of the disengaged clusters (DeleteCluster).
	gone sync.Map
}

// New returns a manager's series, registered in a new registry with the Go
// and process collectors and client-go's REST request series.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total",
			Help: "Total number of reconciliations per controller and result (success, error, requeue, requeue_after; terminal errors and panics count as error).",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total",
			Help: "Total number of reconciliation errors per controller, terminal errors and panics included.",
		}, []string{"controller"}),
		reconcileTerminal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_terminal_reconcile_errors_total",
			Help: "Total number of terminal reconciliation errors per controller.",
		}, []string{"controller"}),
		reconcilePanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_panics_total",
			Help: "Total number of reconciliation panics per controller.",
		}, []string{"controller"}),
		reconcileTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_reconcile_timeouts_total",
			Help: "Total number of reconciliations that ran past the controller's reconcile timeout.",
		}, []string{"controller"}),
		reconcilesByReason: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_reconciles_total",
			Help: "Total number of reconciliations per controller and reason (change, replay, retry, requeue).",
		}, []string{"controller", "reason"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "controller_runtime_reconcile_time_seconds",
			Help:    "Length of time per reconciliation per controller.",
			Buckets: reconcileBuckets,
		}, []string{"controller"}),
		workersMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles",
			Help: "Maximum number of concurrent reconciles per controller.",
		}, []string{"controller"}),
		workersActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_active_workers",
			Help: "Number of currently used workers per controller.",
		}, []string{"controller"}),
		LeaderStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "1 while this process holds the leader lease named by the label, 0 otherwise.",
		}, []string{"name"}),
		cacheObjects: prometheus.NewDesc("converge_cache_objects",
			"Number of objects the shared cache holds, per kind (summed over its informers).",
			[]string{"group", "version", "kind"}, nil),
		cacheBytes: prometheus.NewDesc("converge_cache_bytes",
			"Estimated heap bytes of the objects the shared cache holds, per kind (summed over its informers; values shared between objects are in converge_cache_shared_bytes).",
			[]string{"group", "version", "kind"}, nil),
		informerObjects: prometheus.NewDesc("converge_cache_informer_objects",
			"Number of objects one informer of the shared cache holds; informer describes it (kind, mode, namespace, selectors).",
			[]string{"informer", "group", "version", "kind"}, nil),
		informerBytes: prometheus.NewDesc("converge_cache_informer_bytes",
			"Estimated heap bytes of one informer's objects and store: its objects times the mean size of a sample of every 32nd object, plus its store's map and indexes.",
			[]string{"informer", "group", "version", "kind"}, nil),
		sharedBytes: prometheus.NewDesc("converge_cache_shared_bytes",
			"Estimated heap bytes of the values (labels, annotations, owner references, namespaces, resource lists) the cached objects share, counted once.",
			nil, nil),
		readStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_cache_informers_started_by_reads_total",
			Help: "Informers started by a Get or List of a kind no informer held (kept from then on), by kind and mode (typed, unstructured, metadata).",
		}, []string{"group", "version", "kind", "mode"}),
		CacheErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_cache_request_errors_total",
			Help: "Failed list and watch requests of the shared cache, by resource, namespace, verb and reason (forbidden, unauthorized, not_found, unreachable, timeout, other).",
		}, []string{"resource", "namespace", "verb", "reason"}),
		Queue: newQueue(),
	}
	m.newClusterSeries()
	m.register()
	return m
}

// register registers m's series, the Go and process collectors and
// client-go's REST request series in m.Registry.
func (m *Metrics) register() {
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.reconcileTotal, m.reconcileErrors, m.reconcileTerminal, m.reconcilePanics, m.reconcileTimeouts, m.reconcilesByReason,
		m.reconcileTime, m.workersMax, m.workersActive, m.LeaderStatus, m.CacheErrors, m.readStarts,
		cacheCollector{m}, m.clusterReconciles, m.clusterTime, clusterCollector{m},
	)
	m.Registry.MustRegister(restClientCollectors()...)
	m.Queue.register(m.Registry)
}

// Controller holds one controller's pre-bound series, so the hot path does
// no label lookups.
type Controller struct {
	results  map[string]prometheus.Counter
	reasons  map[reconcile.Reason]prometheus.Counter
	errors   prometheus.Counter
	terminal prometheus.Counter
	panics   prometheus.Counter
	timeouts prometheus.Counter
	duration prometheus.Observer
	// Active is the number of the controller's busy workers.
	Active prometheus.Gauge

	name string
	m    *Metrics
}

// ForController binds the series of the controller name, which runs
// workers workers.
func (m *Metrics) ForController(name string, workers int) *Controller {
	cm := &Controller{
		results:  map[string]prometheus.Counter{},
		reasons:  map[reconcile.Reason]prometheus.Counter{},
		errors:   m.reconcileErrors.WithLabelValues(name),
		terminal: m.reconcileTerminal.WithLabelValues(name),
		panics:   m.reconcilePanics.WithLabelValues(name),
		timeouts: m.reconcileTimeouts.WithLabelValues(name),
		duration: m.reconcileTime.WithLabelValues(name),
		Active:   m.workersActive.WithLabelValues(name),
		name:     name,
		m:        m,
	}
	for _, r := range resultLabels {
		cm.results[r] = m.reconcileTotal.WithLabelValues(name, r)
	}
	for _, r := range reasonLabels {
		cm.reasons[r] = m.reconcilesByReason.WithLabelValues(name, string(r))
	}
	m.workersMax.WithLabelValues(name).Set(float64(workers))
	return cm
}

// Observe counts one reconcile of a key of cluster ("" for the manager's
// own): its outcome (a Result* constant), why it ran, how long it took and
// whether it ran past its timeout.
func (cm *Controller) Observe(cluster, result string, reason reconcile.Reason, took time.Duration, timedOut bool) {
	if cluster != "" {
		cm.m.observeCluster(cm.name, cluster, result, took)
	}
	cm.results[resultLabel(result)].Inc()
	if c := cm.reasons[reason]; c != nil {
		c.Inc()
	}
	switch result {
	case ResultError:
		cm.errors.Inc()
	case ResultPanic:
		cm.errors.Inc()
		cm.panics.Inc()
	case ResultTerminal:
		cm.errors.Inc()
		cm.terminal.Inc()
	}
	if timedOut {
		cm.timeouts.Inc()
	}
	cm.duration.Observe(took.Seconds())
}

// cacheCollector reports, at scrape time, the objects and estimated bytes
// of each informer and of each kind, and the bytes of shared values.
type cacheCollector struct{ m *Metrics }

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.cacheObjects
	ch <- c.m.cacheBytes
	ch <- c.m.informerObjects
	ch <- c.m.informerBytes
	ch <- c.m.sharedBytes
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.CacheStats == nil {
		return
	}
	stats := c.m.CacheStats()
	for _, st := range stats {
		k := st.Kind
		ch <- prometheus.MustNewConstMetric(c.m.informerObjects, prometheus.GaugeValue, float64(st.Objects), st.Description, k.Group, k.Version, k.Kind)
		ch <- prometheus.MustNewConstMetric(c.m.informerBytes, prometheus.GaugeValue, float64(st.Bytes), st.Description, k.Group, k.Version, k.Kind)
	}
	for _, t := range informers.ByKind(stats) {
		k := t.Kind
		ch <- prometheus.MustNewConstMetric(c.m.cacheObjects, prometheus.GaugeValue, float64(t.Objects), k.Group, k.Version, k.Kind)
		ch <- prometheus.MustNewConstMetric(c.m.cacheBytes, prometheus.GaugeValue, float64(t.Bytes), k.Group, k.Version, k.Kind)
	}
	if c.m.SharedBytes != nil {
		ch <- prometheus.MustNewConstMetric(c.m.sharedBytes, prometheus.GaugeValue, float64(c.m.SharedBytes()))
	}
}

// NoteUnwatchedReads returns the cache's OnUnwatchedRead: it counts each
// informer a read started and logs it, then calls user, when set.
func (m *Metrics) NoteUnwatchedReads(log logr.Logger, user func(informers.UnwatchedRead)) func(informers.UnwatchedRead) {
	return func(r informers.UnwatchedRead) {
		m.readStarts.WithLabelValues(r.Kind.Group, r.Kind.Version, r.Kind.Kind, r.Mode.String()).Inc()
		log.Info("a read of a kind no informer held started an informer, which the cache keeps: watch the kind, declare it in Options.Cache.ByKind, "+
			"or read it with Manager.APIReader (Options.Cache.RefuseUnwatchedReads refuses such reads)",
			"informer", r.Informer, "kind", r.Kind.String(), "mode", r.Mode.String())
		if user != nil {
			user(r)
		}
	}
}

// Queue implements client-go's workqueue MetricsProvider with the
// workqueue_* series controller-runtime exports (labels: name, controller).
type Queue struct {
	depth      *prometheus.GaugeVec
	adds       *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	work       *prometheus.HistogramVec
	unfinished *prometheus.GaugeVec
	longest    *prometheus.GaugeVec
	retries    *prometheus.CounterVec
}

var _ clientworkqueue.MetricsProvider = (*Queue)(nil)

func newQueue() *Queue {
	labels := []string{"name", "controller"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	return &Queue{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of workqueue.",
		}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue.",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested.",
			Buckets: buckets,
		}, labels),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
		}, labels),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue.",
		}, labels),
	}
}

func (q *Queue) register(r *prometheus.Registry) {
	r.MustRegister(q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries)
}

// The queue of a controller is named after it; both labels carry the name.

func (q *Queue) NewDepthMetric(name string) clientworkqueue.GaugeMetric {
	return q.depth.WithLabelValues(name, name)
}

func (q *Queue) NewAddsMetric(name string) clientworkqueue.CounterMetric {
	return q.adds.WithLabelValues(name, name)
}

func (q *Queue) NewLatencyMetric(name string) clientworkqueue.HistogramMetric {
	return q.latency.WithLabelValues(name, name)
}

func (q *Queue) NewWorkDurationMetric(name string) clientworkqueue.HistogramMetric {
	return q.work.WithLabelValues(name, name)
}

func (q *Queue) NewUnfinishedWorkSecondsMetric(name string) clientworkqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name, name)
}

func (q *Queue) NewLongestRunningProcessorSecondsMetric(name string) clientworkqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name, name)
}

func (q *Queue) NewRetriesMetric(name string) clientworkqueue.CounterMetric {
	return q.retries.WithLabelValues(name, name)
}
