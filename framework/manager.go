package framework

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/informers"
)

// ErrManagerStarted is returned by Start when the manager was started before.
var ErrManagerStarted = errors.New("framework: manager already started")

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

// Options configures a Manager. The zero value is a valid configuration.
type Options struct {
	// Scheme maps Go types to kinds for the cache and the client.
	// Zero means a new scheme holding client-go's built-in types; add your own
	// API types to it through Manager.Scheme before building controllers.
	Scheme *runtime.Scheme

	// Logger is the root logger; controllers add their name and each
	// reconcile adds the object and a reconcile ID.
	// Zero means slog's default logger (text on standard error).
	Logger logr.Logger

	// Cache configures the shared cache (namespace, per-kind selections,
	// resync, sync timeout, managedFields). Its Scheme and Mapper fields are
	// ignored: the manager's are used. Zero means all namespaces, no resync,
	// a 2-minute sync timeout and managedFields stripped.
	Cache informers.Options

	// GracefulShutdownTimeout is how long in-flight reconciles may run after
	// Start's context is cancelled before their contexts are cancelled too.
	// Zero means 30 seconds; negative means in-flight reconciles are cancelled
	// at once.
	GracefulShutdownTimeout time.Duration
}

const defaultGracefulShutdownTimeout = 30 * time.Second

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = runtime.NewScheme()
		// AddToScheme only fails on conflicting registrations, impossible on a new scheme.
		_ = clientgoscheme.AddToScheme(o.Scheme)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.FromSlogHandler(slog.Default().Handler())
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = defaultGracefulShutdownTimeout
	}
	return o
}

// Manager owns what the controllers of one process share: the API server
// configuration, the scheme, the REST mapper, the shared cache and the client.
// It runs the cache and every added Runnable (controllers among them).
//
// Build controllers with NewController, then call Start once.
type Manager struct {
	opts    Options
	cfg     *rest.Config
	mapper  meta.RESTMapper
	cache   *informers.Cache
	client  *Client
	log     logr.Logger
	metrics *metrics

	mu sync.Mutex
	// runnables are started by Start, in order; mu guards it, names and runCtx.
	runnables []Runnable
	// names holds the controller names in use, to reject duplicates.
	names map[string]bool
	// runCtx is the context runnables added after Start run on; nil before Start.
	runCtx context.Context
	// runErr receives the first failure of a runnable added after Start.
	runErr chan error
	// wg counts running runnables.
	wg sync.WaitGroup
}

// NewManager returns a Manager for the API server cfg points at. A nil cfg is
// loaded with LoadConfig("") (kubeconfig, then in-cluster).
//
// When cfg sets no client-side rate limit (QPS 0), the manager uses 50 QPS
// with bursts of 100 instead of client-go's 5 and 10, which throttle
// controllers long before a modern API server's own flow control does.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(""); err != nil {
			return nil, err
		}
	}
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "converge"
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("framework: HTTP client for %s: %w", cfg.Host, err)
	}
	mapper, err := informers.NewRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	cacheOpts := opts.Cache
	cacheOpts.Scheme, cacheOpts.Mapper = opts.Scheme, mapper
	c, err := informers.New(cfg, cacheOpts)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		opts:    opts,
		cfg:     cfg,
		mapper:  mapper,
		cache:   c,
		log:     opts.Logger,
		names:   map[string]bool{},
		runErr:  make(chan error, 1),
		metrics: newMetrics(),
	}
	m.metrics.cacheObjectsSource = c.Stats
	m.client = newClient(cfg, httpClient, opts.Scheme, mapper, c)
	return m, nil
}

// Config returns a copy of the manager's API server configuration.
func (m *Manager) Config() *rest.Config { return rest.CopyConfig(m.cfg) }

// Scheme returns the manager's scheme. Register API types before building
// controllers that use them.
func (m *Manager) Scheme() *runtime.Scheme { return m.opts.Scheme }

// RESTMapper returns the manager's discovery-backed REST mapper.
func (m *Manager) RESTMapper() meta.RESTMapper { return m.mapper }

// Cache returns the shared cache.
func (m *Manager) Cache() *informers.Cache { return m.cache }

// Client returns the client that reads from the shared cache and writes to the API server.
func (m *Manager) Client() *Client { return m.client }

// Metrics returns the manager's Prometheus registry, which holds the
// framework's series; register your own collectors on it to export them too.
func (m *Manager) Metrics() *prometheus.Registry { return m.metrics.registry }

// Logger returns the manager's root logger.
func (m *Manager) Logger() logr.Logger { return m.log }

// Add registers r to run when the manager starts, or starts it at once when
// the manager is already running.
func (m *Manager) Add(r Runnable) error {
	if r == nil {
		return errors.New("framework: Manager.Add called with a nil Runnable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runCtx != nil {
		m.startLocked(r)
		return nil
	}
	m.runnables = append(m.runnables, r)
	return nil
}

// startLocked runs r on the run context. m.mu must be held.
func (m *Manager) startLocked(r Runnable) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := r.Start(m.runCtx); err != nil {
			select {
			case m.runErr <- err:
			default: // an earlier failure is already stopping the manager
			}
		}
	}()
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

// Start runs the shared cache, waits until every informer requested so far
// has synced, then runs every Runnable until ctx is cancelled or one of them
// fails. On cancellation it stops controllers taking new keys, lets in-flight
// reconciles finish (up to Options.GracefulShutdownTimeout), stops the cache
// and returns nil; on failure it does the same and returns the error. A
// manager can be started once; a second call returns ErrManagerStarted.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.runCtx != nil {
		m.mu.Unlock()
		return ErrManagerStarted
	}
	// The cache outlives the runnables so that draining reconciles can
	// still read from it.
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	runCtx, stopRunnables := context.WithCancel(ctx)
	m.runCtx = runCtx
	m.mu.Unlock()

	cacheDone := make(chan struct{})
	go func() {
		defer close(cacheDone)
		_ = m.cache.Start(cacheCtx)
	}()
	shutdown := func(err error) error {
		stopRunnables()
		m.wg.Wait()
		stopCache()
		<-cacheDone
		return err
	}

	m.log.V(1).Info("waiting for caches to sync")
	if err := m.cache.WaitForSync(ctx); err != nil {
		if ctx.Err() != nil {
			return shutdown(nil)
		}
		return shutdown(fmt.Errorf("framework: start manager: %w", err))
	}
	m.mu.Lock()
	for _, r := range m.runnables {
		m.startLocked(r)
	}
	m.runnables = nil
	m.mu.Unlock()
	m.log.V(1).Info("manager started")

	select {
	case <-ctx.Done():
		m.log.V(1).Info("stopping manager")
		return shutdown(nil)
	case err := <-m.runErr:
		m.log.Error(err, "stopping manager after a component failed")
		return shutdown(err)
	}
}

// drainTimeout is the grace in-flight reconciles get at shutdown.
func (m *Manager) drainTimeout() time.Duration {
	if m.opts.GracefulShutdownTimeout < 0 {
		return 0
	}
	return m.opts.GracefulShutdownTimeout
}
