package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/fence"
	"github.com/converge-dev/converge/framework/internal/metrics"
	"github.com/converge-dev/converge/framework/internal/recorder"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/internal/runner"
	"github.com/converge-dev/converge/framework/internal/served"
	"github.com/converge-dev/converge/framework/internal/serving"
	"github.com/converge-dev/converge/framework/internal/shard"
	"github.com/converge-dev/converge/framework/internal/spread"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/sharding"
)

// ErrManagerStarted is returned by Start when the manager was started before.
var ErrManagerStarted = errors.New("framework: manager already started")

// ErrManagerStopped is wrapped by the error of every write through the
// manager's client once the manager has stopped: Start has returned, or is
// about to release the lease and return. Writes that are still wanted then
// need a client of their own.
var ErrManagerStopped = errors.New("framework: the manager has stopped; its client no longer writes")

// ErrNotLeader is wrapped by the error of every write through the manager's
// client once this process has lost leadership: another process may already
// lead, and a write from here could undo its work.
var ErrNotLeader = errors.New("framework: this process is no longer the leader; its client no longer writes")

// Runnable is a component the Manager runs: Start blocks until ctx is done
// (then returns nil) or the component fails (then returns the error, which
// stops the manager).
type Runnable interface {
	Start(ctx context.Context) error
}

// RunnableFunc adapts a function to a Runnable.
type RunnableFunc func(ctx context.Context) error

var _ Runnable = RunnableFunc(nil)

// Start calls f(ctx).
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// Manager owns what the controllers of one process share: the API server
// configuration, the scheme, the REST mapper, the shared cache, the client
// and the API reader. The last three share one HTTP client and one set of
// REST clients, made by the cache once per API group version and wire
// format (see informers.Cache.RESTClient). It runs the cache and every
// added Runnable (controllers among them).
//
// Build controllers with NewBuilder, then call Start once.
type Manager struct {
	opts   Options
	cfg    *rest.Config
	mapper meta.RESTMapper
	cache  *informers.Cache
	client *client.Client
	api    *client.APIReader
	// clusters are the engaged clusters: the manager's own, whose cache,
	// client and API reader are the three above, and its providers'.
	clusters *cluster.Set
	log      logr.Logger
	metrics  *metrics.Metrics
	http     *http.Client
	events   events.EventBroadcaster
	// notFound tells the sources made by WhenServed of a list or watch of
	// their kind that found no such resource.
	notFound *served.Signals

	// synced is set once the caches first synced (readiness needs it).
	synced atomic.Bool
	// lostLeadership is set when the lease is lost: in-flight reconciles are
	// cancelled without the graceful drain.
	lostLeadership atomic.Bool
	// runErr receives the first failure of any runnable.
	runErr chan error

	// refused is why the client refuses writes, nil while it writes (see
	// allowWrite); set once, by refuseWrites.
	refused atomic.Pointer[error]
	// isLeader, set once this process leads an election, returns nil while
	// the lease was last seen held by this process and renewed within
	// RenewDeadline, else why not.
	isLeader atomic.Pointer[func() error]
	// leaseHook, when a test sets it before Start, edits the election's lock.
	leaseHook func(*fence.Lock)
	// lost is closed, once (loseOnce), when leadership is lost.
	lost     chan struct{}
	loseOnce sync.Once

	mu sync.Mutex
	// started is set by Start; mu guards it and every field below.
	started bool
	// runnables were added before Start.
	runnables []Runnable
	// leaderPending are runnables that need leadership, waiting for it.
	leaderPending []Runnable
	// leading is set once this process leads (at once without election).
	leading bool
	// elected is closed when leading is set.
	elected chan struct{}
	// always and leaders run the runnables once Start has synced the caches.
	always, leaders *runner.Group
	// names holds the controller names in use, to reject duplicates.
	names map[string]bool
	// healthChecks and readyChecks are the named probe checks.
	healthChecks, readyChecks map[string]Check
	// metricsAddr, probeAddr and webhookAddr are the addresses served,
	// once listening.
	metricsAddr, probeAddr, webhookAddr string
	// webhooks are the webhook handlers by path, and conversion the one
	// conversion handler, once a conversion is registered.
	webhooks   map[string]webhook.Handler
	conversion *webhook.Conversion
	// inspected are the controllers, in the order they were built, for the
	// debug endpoint.
	inspected []inspectable

	// ring is this process's membership of the sharding ring, and
	// ringMetrics its series; nil without Options.Sharding.Ring. holds
	// counts the sharded controllers reading each bucket informer.
	ring        *ring.Ring
	ringMetrics *ring.Metrics
	gate        *spread.Gate // spreads the clusters over the ring; nil without Options.Sharding.Clusters
	holds       shard.Holds
}

// NewManager returns a Manager for the API server cfg points at. A nil cfg is
// loaded with LoadConfig("") (kubeconfig, then in-cluster).
//
// When cfg sets no client-side rate limit (QPS 0 and no RateLimiter), the
// manager's requests are not rate-limited by the client: the API server's
// priority and fairness (on by default since Kubernetes 1.20) queues and
// sheds load itself, and client-go's default of 5 QPS throttles a
// controller long before it would. A positive cfg.QPS (and Burst), or a
// cfg.RateLimiter, limits the requests of the whole manager.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(""); err != nil {
			return nil, err
		}
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg = clientConfig(cfg, opts)
	httpClient := opts.Cache.HTTPClient
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("framework: HTTP client for %s: %w", cfg.Host, err)
		}
	}
	var mapper meta.RESTMapper = opts.Cache.Mapper
	if mapper == nil {
		var err error
		if mapper, err = informers.NewRESTMapper(cfg, httpClient); err != nil {
			return nil, err
		}
	}
	cacheOpts := opts.Cache
	cacheOpts.Scheme, cacheOpts.Mapper, cacheOpts.HTTPClient = opts.Scheme, mapper, httpClient
	mets := metrics.New()
	notFound := &served.Signals{}
	cacheOpts.OnRequestError = countRequestErrors(mets, notFound, cacheOpts.OnRequestError)
	cacheOpts.OnUnwatchedRead = mets.NoteUnwatchedReads(opts.Logger, cacheOpts.OnUnwatchedRead)
	m := &Manager{
		opts:         opts,
		cfg:          cfg,
		mapper:       mapper,
		log:          opts.Logger,
		names:        map[string]bool{},
		healthChecks: map[string]Check{},
		readyChecks:  map[string]Check{},
		webhooks:     map[string]webhook.Handler{},
		runErr:       make(chan error, 1),
		metrics:      mets,
		notFound:     notFound,
		http:         httpClient,
		elected:      make(chan struct{}),
		lost:         make(chan struct{}),
		gate:         spread.New(opts.Sharding),
	}
	// The manager's own cluster is built, and engaged, like any other.
	local, err := cluster.New(cluster.Target{Name: "", Config: cfg, Source: "the manager's configuration"}, cacheOpts, m.allowWrite)
	if err != nil {
		return nil, err
	}
	m.cache, m.client, m.api = local.Cache(), local.Client(), local.APIReader()
	m.metrics.CacheStats, m.metrics.SharedBytes = m.cache.Stats, m.cache.SharedBytes
	if m.clusters, err = cluster.NewSet(local, m.clusterOptions()); err != nil {
		return nil, fmt.Errorf("framework: Options.Clusters: %w", err)
	}
	m.metrics.Clusters = func() []metrics.Cluster { return clusterSeries(m.clusters.Stats()) }
	m.clusters.Subscribe(clusterMetrics{m.metrics})
	if err := m.newEvents(); err != nil {
		return nil, err
	}
	if opts.Sharding.Ring != "" {
		j, err := spread.Join(m.cfg, m.http, opts.Sharding, m.log, m.metrics.Registry, opts.SyncHeapRatio, m.gate, m.clusters)
		if err != nil {
			return nil, err
		}
		m.ring, m.ringMetrics = j.Ring, j.Metrics
		m.readyChecks[ring.ReadyCheck] = func(*http.Request) error { return m.ring.Ready() }
	}
	return m, nil
}

// clientConfig is cfg as the manager's requests use it: no client-side rate limit
// or converge's user agent unless cfg sets them, uncompressed as opts or loopback say.
func clientConfig(cfg *rest.Config, opts Options) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS = -1 // no client-side limit (see NewManager)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "converge"
	}
	if opts.DisableCompression || serving.LoopbackServer(cfg.Host) {
		cfg.DisableCompression = true
	}
	return cfg
}

// countRequestErrors returns the cache's OnRequestError: it counts each
// failed request in metrics, signals a kind the API server no longer serves
// to notFound, then calls user, when set.
func countRequestErrors(mets *metrics.Metrics, notFound *served.Signals, user func(informers.RequestError)) func(informers.RequestError) {
	return func(e informers.RequestError) {
		resource := e.Resource
		if resource == "" {
			resource = e.Kind.GroupKind().String()
		}
		mets.CacheErrors.WithLabelValues(resource, e.Namespace, e.Verb, e.Class).Inc()
		if e.Class == "not_found" {
			notFound.Signal(e.Kind.GroupKind()) // a CRD deleted? (see WhenServed)
		}
		if user != nil {
			user(e)
		}
	}
}

// newEvents makes m's event broadcaster.
func (m *Manager) newEvents() error {
	ev, err := eventsv1.NewForConfigAndClient(m.cfg, m.http)
	if err != nil {
		return fmt.Errorf("framework: events client for %s: %w", m.cfg.Host, err)
	}
	m.events = events.NewBroadcaster(recorder.NewSink(ev, m.log))
	return nil
}

// RingStatus reports this member's view of its sharding ring: the buckets
// it serves, syncs and drains, and the live members. ok is false without
// Options.Sharding.Ring.
func (m *Manager) RingStatus() (status sharding.Status, ok bool) {
	if m.ring == nil {
		return sharding.Status{}, false
	}
	return m.ring.Status(), true
}

// Config returns a copy of the manager's API server configuration.
func (m *Manager) Config() *rest.Config { return rest.CopyConfig(m.cfg) }

// Scheme returns the manager's scheme. Register API types before building
// controllers that use them.
func (m *Manager) Scheme() *runtime.Scheme { return m.opts.Scheme }

// RESTMapper returns the manager's REST mapper: Options.Cache.Mapper, else
// one backed by discovery.
func (m *Manager) RESTMapper() meta.RESTMapper { return m.mapper }

// Clusters returns the set of engaged clusters: the manager's own, named
// "" (whose cache, client and API reader are Cache, Client and APIReader),
// and those the providers of Options.Clusters engage.
func (m *Manager) Clusters() *cluster.Set { return m.clusters }

// clusterOptions are the options of m's Set: Options.Clusters, with the
// template of remote caches made from Options.Cache when it is zero, the
// manager's write fence before the options' own, and a logger.
func (m *Manager) clusterOptions() cluster.Options {
	o := m.opts.Clusters
	o.Providers = m.gate.Wrap(o.Providers)
	if reflect.ValueOf(o.Cache).IsZero() {
		o.Cache = m.opts.Cache
		o.Cache.Mapper, o.Cache.HTTPClient, o.Cache.OnRequestError = nil, nil, nil
	}
	if o.Cache.Scheme == nil {
		o.Cache.Scheme = m.opts.Scheme
	}
	user := o.Fence
	o.Fence = func() error {
		if err := m.allowWrite(); err != nil {
			return err
		}
		if user != nil {
			return user()
		}
		return nil
	}
	if o.Logger.GetSink() == nil {
		o.Logger = m.log.WithName("clusters")
	}
	return o
}

// Cache returns the shared cache.
func (m *Manager) Cache() *informers.Cache { return m.cache }

// Client returns the client that reads from the shared cache and writes to
// the API server. It refuses writes once leadership is lost or the manager
// has stopped (ErrNotLeader, ErrManagerStopped; see client.Client).
func (m *Manager) Client() *client.Client { return m.client }

// APIReader returns a reader that reads straight from the API server,
// without the cache (see client.APIReader).
func (m *Manager) APIReader() *client.APIReader { return m.api }

// allowWrite says whether the client may send a write now: nil, or an error
// wrapping ErrNotLeader or ErrManagerStopped. A leader that sees the lease
// held by another process, or last renewed RenewDeadline ago, treats it as
// lost at once, without waiting for the elector to give up.
func (m *Manager) allowWrite() error {
	if err := m.refused.Load(); err != nil {
		return *err
	}
	if leading := m.isLeader.Load(); leading != nil {
		if err := (*leading)(); err != nil {
			m.loseLeadership(err)
			return *m.refused.Load()
		}
	}
	return nil
}

// refuseWrites makes every later write fail with err, unless writes are
// already refused.
func (m *Manager) refuseWrites(err error) {
	m.refused.CompareAndSwap(nil, &err)
}

// loseLeadership refuses writes, naming cause, cancels in-flight reconciles
// without the graceful drain and tells Start, once.
func (m *Manager) loseLeadership(cause error) {
	m.loseOnce.Do(func() {
		m.refuseWrites(fmt.Errorf("%w (%v)", ErrNotLeader, cause))
		m.lostLeadership.Store(true)
		close(m.lost)
	})
}

// Elected is closed once this process runs the controllers that need
// leadership: when it wins the election, or as soon as the caches synced
// when leader election is off.
func (m *Manager) Elected() <-chan struct{} { return m.elected }

// Metrics returns the manager's Prometheus registry, which holds the
// framework's series; register your own collectors on it to export them too.
func (m *Manager) Metrics() *prometheus.Registry { return m.metrics.Registry }

// Logger returns the manager's root logger.
func (m *Manager) Logger() logr.Logger { return m.log }

// Add registers r to run once the manager has started and synced its caches
// (and, if r needs leadership, once this process leads), or starts it at once
// when that time has come.
// It fails when r is nil or a typed nil (a nil pointer or RunnableFunc).
func (m *Manager) Add(r Runnable) error {
	if err := typednil.Check("r", r); err != nil {
		return fmt.Errorf("framework: Manager.Add: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case needsLeader(r) && m.leading:
		m.leaders.Start(r)
	case needsLeader(r):
		m.leaderPending = append(m.leaderPending, r)
	case m.always != nil:
		m.always.Start(r)
	default:
		m.runnables = append(m.runnables, r)
	}
	return nil
}

// claimName reserves a controller name.
func (m *Manager) claimName(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names[name] {
		return fmt.Errorf("framework: a controller named %q already exists in this manager; controller names must be unique (they label logs and metrics)", name)
	}
	m.names[name] = true
	return nil
}
