package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/klogcap"
)

// ErrDisengaged is wrapped by the error of every write through the client
// of a cluster that was disengaged (its provider removed it, or a new
// engagement of its name replaced it): the cluster is no longer this
// manager's to change.
var ErrDisengaged = errors.New("cluster: disengaged; its client no longer writes")

// ErrNotEngaged is wrapped by Set.Get's error for a name no cluster is
// engaged under.
var ErrNotEngaged = errors.New("cluster: not engaged")

// Cluster is one API server the manager talks to, with the cache, client,
// API reader and REST mapper of that server. The manager's own cluster is
// named ""; the others are named by their Target.
//
// A Cluster's parts are safe for concurrent use. Its client refuses writes
// once the cluster is disengaged (ErrDisengaged).
type Cluster struct {
	name   string
	target Target
	cfg    *rest.Config
	http   *http.Client
	mapper meta.RESTMapper
	cache  *informers.Cache
	client *client.Client
	api    *client.APIReader

	// ctx ends when the cluster is disengaged; stop ends it.
	ctx  context.Context
	stop context.CancelFunc
	// fenced is why the client refuses writes, nil while it writes.
	fenced atomic.Pointer[error]
	// cacheDone is closed when the cache's Start returned (remote
	// clusters, whose cache the Set runs).
	cacheDone chan struct{}
	// conns are the connections of a cluster with an API server of its
	// own, closed once its cache stopped; nil for one that shares the
	// manager's.
	conns *conns

	mu sync.Mutex
	// health is the cluster's last reported state; mu guards it.
	health Health
}

// New makes the parts of a cluster for the API server t.Config points at:
// an HTTP client, a REST mapper backed by discovery, a cache (limited to
// t.Namespace when set), a client and an API reader. It starts nothing and
// sends no request (discovery waits for the first mapping); the Set starts
// the cache of the clusters it engages, after a probe.
//
// cacheOpts is the template of the cache: its Mapper and HTTPClient, when
// set, are used as they are (the manager hands its own for its cluster);
// nil means new ones for t.Config. fence, when not nil, is asked before
// each write after the cluster's own check (the manager's leadership),
// and t.Fence after it.
func New(t Target, cacheOpts informers.Options, fence func() error) (*Cluster, error) {
	return newCluster(t, cacheOpts, fence, false)
}

// newCluster is New; with own, the cluster dials its connections itself,
// on a transport of its own, and closes them all once its cache stopped
// (see conns): the Set's clusters whose API server is not the manager's.
func newCluster(t Target, cacheOpts informers.Options, fence func() error, own bool) (*Cluster, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{name: t.Name, target: t, cfg: rest.CopyConfig(t.Config), cacheDone: make(chan struct{})}
	if own && cacheOpts.HTTPClient == nil {
		c.conns = newConns(c.cfg.Dial)
		c.cfg.Dial = c.conns.DialContext
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	var err error
	if c.http = cacheOpts.HTTPClient; c.http == nil {
		if c.http, err = rest.HTTPClientFor(c.cfg); err != nil {
			return nil, fmt.Errorf("cluster %s: HTTP client for %s: %w", t.describe(), c.cfg.Host, err)
		}
	}
	if c.mapper = cacheOpts.Mapper; c.mapper == nil {
		if c.mapper, err = informers.NewRESTMapper(c.cfg, c.http); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", t.describe(), err)
		}
	}
	cacheOpts.Mapper, cacheOpts.HTTPClient = c.mapper, c.http
	if t.Namespace != "" {
		cacheOpts.Namespace = t.Namespace
	}
	if c.cache, err = informers.New(c.cfg, cacheOpts); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", t.describe(), err)
	}
	copts := client.Options{Scheme: c.cache.Scheme(), Mapper: c.mapper, Cache: c.cache, RequestLogger: klogcap.Logger, Cluster: t.Name}
	if c.api, err = client.NewAPIReader(copts); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", t.describe(), err)
	}
	copts.Fence = func() error {
		if err := c.fenced.Load(); err != nil {
			return *err
		}
		if fence != nil {
			if err := fence(); err != nil {
				return err
			}
		}
		if t.Fence != nil {
			return t.Fence()
		}
		return nil
	}
	if c.client, err = client.New(copts); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", t.describe(), err)
	}
	c.health = Health{Cluster: t.Name, Source: t.Source, State: StateEngaging, Since: time.Now()}
	return c, nil
}

// Name returns the cluster's name: "" for the manager's own cluster.
func (c *Cluster) Name() string { return c.name }

// Target returns the target the cluster was engaged from.
func (c *Cluster) Target() Target { return c.target }

// Config returns a copy of the cluster's API server configuration.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// Cache returns the cluster's cache.
func (c *Cluster) Cache() *informers.Cache { return c.cache }

// Client returns the client that reads from the cluster's cache and writes
// to its API server; it refuses writes once the cluster is disengaged
// (ErrDisengaged).
func (c *Cluster) Client() *client.Client { return c.client }

// APIReader returns a reader that reads straight from the cluster's API
// server.
func (c *Cluster) APIReader() *client.APIReader { return c.api }

// RESTMapper returns the cluster's REST mapper.
func (c *Cluster) RESTMapper() meta.RESTMapper { return c.mapper }

// Health returns the cluster's state as last seen.
func (c *Cluster) Health() Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

// Context returns a context that ends when the cluster is disengaged (the
// manager's own cluster's never ends).
func (c *Cluster) Context() context.Context { return c.ctx }

// setState records the cluster's state, with err when it failed.
func (c *Cluster) setState(s State, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.health.State != s {
		c.health.Since = time.Now()
	}
	c.health.State, c.health.Err = s, ""
	if err != nil {
		c.health.Err = err.Error()
	}
}

// run runs the cluster's cache until it is disengaged, then closes its
// connections: all of them when it has its own (conns), else the idle
// ones once more. The cache's watches end only as Start returns, so the
// connection they held was not idle yet when disengage closed the idle
// ones, and would otherwise stay open, with its goroutines and buffers,
// until the transport's idle timeout (client-go's 90 s).
func (c *Cluster) run() {
	defer close(c.cacheDone)
	_ = c.cache.Start(c.ctx) // returns nil when ctx ends, its informers stopped
	if c.conns != nil {
		c.conns.closeAll()
	}
	c.closeIdleConnections()
}

// closeIdleConnections closes the idle connections of the cluster's HTTP
// client. http.Client.CloseIdleConnections would not reach them: client-go
// wraps the transport (authentication, user agent) in round trippers that
// have no such method, so the wrappers are unwrapped down to it.
func (c *Cluster) closeIdleConnections() {
	utilnet.CloseIdleConnectionsFor(c.http.Transport)
}

// probe asks the API server whether it is ready (GET /readyz), within
// timeout.
func (c *Cluster) probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rc, err := c.cache.RESTClient(schema.GroupVersion{Version: "v1"})
	if err != nil {
		return err
	}
	if err := rc.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return fmt.Errorf("probe %s/readyz: %w", c.cfg.Host, err)
	}
	return nil
}

// disengage fences the client, cancels the cluster's context and so stops
// its cache, and closes its idle connections.
func (c *Cluster) disengage() {
	err := ErrDisengaged // the client's errors name the cluster
	c.fenced.CompareAndSwap(nil, &err)
	c.setState(StateDisengaged, nil)
	c.stop()
	c.closeIdleConnections()
}

// contextKey is the type of From's context key.
type contextKey struct{}

// NewContext returns a copy of ctx that carries c, for From.
func NewContext(ctx context.Context, c *Cluster) context.Context {
	return context.WithValue(ctx, contextKey{}, c)
}

// From returns the cluster ctx carries: in a reconcile, the cluster of its
// request (the manager's own for a request whose Cluster is ""); in a Map
// function of a source, the cluster of the event. It returns nil when ctx
// carries none.
func From(ctx context.Context) *Cluster {
	c, _ := ctx.Value(contextKey{}).(*Cluster)
	return c
}
