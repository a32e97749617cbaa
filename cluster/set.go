package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/typednil"
)

// ErrDuplicate is wrapped by Engage's error for a name that another source
// engaged already.
var ErrDuplicate = errors.New("cluster: name engaged from another source")

// Options configures a Set. The zero value is a valid configuration: no
// providers (the manager's own cluster only).
type Options struct {
	// Providers discover the clusters to engage besides the manager's own.
	// Each runs from the Set's Run until it ends. Zero means none.
	Providers []Provider

	// MaxEngaging is how many clusters may connect and probe at once;
	// others wait for a slot, so that a burst of new clusters does not
	// starve the process. Zero means 4.
	MaxEngaging int

	// Health configures the probes (GET /readyz) of the clusters: the one
	// an engagement must pass before the cluster is engaged, and those
	// that watch an engaged cluster. Zero means the defaults of
	// HealthOptions.
	Health HealthOptions

	// Cache is the template of the caches of the engaged clusters; each
	// gets a REST mapper and an HTTP client of its own, so Mapper and
	// HTTPClient must be nil, and Target.Namespace, when set, replaces
	// Namespace. Zero means the defaults of informers.Options.
	Cache informers.Options

	// Fence, when not nil, is asked before each write through any engaged
	// cluster's client, after the cluster's own check (ErrDisengaged): a
	// manager refuses writes once it stops or loses leadership. Zero means
	// no fence of its own.
	Fence func() error

	// Logger logs engagements and failures. Zero means none.
	Logger logr.Logger
}

// HealthOptions configures the probes of the clusters. A probe is a GET
// of /readyz: it also catches an API server that stopped answering without
// breaking its watches' connections, which no informer error shows.
type HealthOptions struct {
	// Interval is the time between the probes of an engaged cluster. Zero
	// means 10 seconds; negative means engaged clusters are not probed.
	Interval time.Duration
	// Timeout bounds each probe. Zero means 5 seconds.
	Timeout time.Duration
	// FailureThreshold is how many probes in a row must fail for an
	// engaged cluster to turn unhealthy (StateUnhealthy: HealthListeners
	// hear Unhealthy, and controllers hold its keys until a probe
	// passes). Zero means 3.
	FailureThreshold int
}

func (o Options) withDefaults() Options {
	if o.MaxEngaging == 0 {
		o.MaxEngaging = 4
	}
	h := &o.Health
	if h.Interval == 0 {
		h.Interval = 10 * time.Second
	}
	if h.Timeout == 0 {
		h.Timeout = 5 * time.Second
	}
	if h.FailureThreshold == 0 {
		h.FailureThreshold = 3
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.MaxEngaging < 0 {
		errs = append(errs, fmt.Errorf("MaxEngaging must not be negative, got %d", o.MaxEngaging))
	}
	if o.Health.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Health.Timeout must not be negative, got %v", o.Health.Timeout))
	}
	if o.Health.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("Health.FailureThreshold must not be negative, got %d", o.Health.FailureThreshold))
	}
	if o.Cache.Mapper != nil || o.Cache.HTTPClient != nil {
		errs = append(errs, errors.New("Cache.Mapper and Cache.HTTPClient must be nil: each cluster gets its own"))
	}
	for i, p := range o.Providers {
		if typednil.Is(p) {
			errs = append(errs, fmt.Errorf("Providers[%d] is nil", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// Listener hears of engaged and disengaged clusters (see Set.Subscribe).
// Its methods are called one at a time, in order, and must return soon:
// they hold up every other engagement.
type Listener interface {
	// Engaged is called when c is engaged (its probe passed; its cache
	// runs, with no informer yet unless someone asked for one).
	Engaged(c *Cluster)
	// Disengaged is called when c is disengaged, before its client is
	// fenced and its cache stopped: the place to clean up what was
	// written to c (c.Client() still writes), with a short timeout, for
	// it holds up every other engagement. Writes to a c that cannot be
	// reached fail, and what they would remove stays.
	Disengaged(c *Cluster)
}

// HealthListener is the optional interface of a Listener that hears when
// an engaged cluster turns unhealthy (HealthOptions.FailureThreshold probes
// in a row failed) and when a probe passes again. Subscribe checks for it
// with a type assertion. Its calls are ordered with Engaged and
// Disengaged, and come only between them.
type HealthListener interface {
	Unhealthy(c *Cluster)
	Healthy(c *Cluster)
}

// Set is the registry of the clusters a manager talks to: its own, named
// "", and those its providers engage. It is the providers' Engager. Its
// methods are safe for concurrent use.
type Set struct {
	opts  Options
	local *Cluster
	slots chan struct{}

	// notify serializes engagements and disengagements with the listeners'
	// calls, so that listeners hear them in order; take it before mu.
	notify sync.Mutex

	mu sync.Mutex
	// ctx is Run's context, nil before Run; mu guards it and every field
	// below.
	ctx context.Context
	// wishes are the targets providers asked for, by name.
	wishes map[string]*wish
	// engaged are the engaged clusters but the local one, by name.
	engaged map[string]*Cluster
	// failed are the failures providers reported (Fail) and the
	// duplicates Engage refused, by source.
	failed    map[string]Health
	listeners []Listener
	wg        sync.WaitGroup
}

// wish is a target a provider asked for, and its engagement's state.
type wish struct {
	target  Target
	version string
	cancel  context.CancelFunc // nil until started
	health  Health
}

var _ Engager = (*Set)(nil)

// NewSet returns the Set of the manager whose own cluster is local.
func NewSet(local *Cluster, opts Options) (*Set, error) {
	if local == nil || local.name != "" {
		return nil, errors.New("cluster: NewSet needs the manager's own cluster, named \"\"")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Set{
		opts: opts, local: local, slots: make(chan struct{}, opts.MaxEngaging),
		wishes: map[string]*wish{}, engaged: map[string]*Cluster{}, failed: map[string]Health{},
	}, nil
}

// Local returns the manager's own cluster.
func (s *Set) Local() *Cluster { return s.local }

// Get returns the engaged cluster named name ("" for the manager's own),
// or an error wrapping ErrNotEngaged.
func (s *Set) Get(name string) (*Cluster, error) {
	if name == "" {
		return s.local, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.engaged[name]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("cluster %q: %w", name, ErrNotEngaged)
}

// Names returns the names of the engaged clusters, sorted: "" (the
// manager's own) first.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := []string{""}
	for n := range s.engaged {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Health returns the state of every cluster the Set knows of: the engaged
// ones, those engaging or waiting to retry, and the targets providers
// reported as failed; sorted by name, then source.
func (s *Set) Health() []Health {
	s.mu.Lock()
	out := []Health{s.local.Health()}
	for name, w := range s.wishes {
		if c := s.engaged[name]; c != nil && w.health.State == StateReady {
			out = append(out, c.Health())
			continue
		}
		out = append(out, w.health)
	}
	for name, c := range s.engaged {
		if s.wishes[name] == nil {
			out = append(out, c.Health())
		}
	}
	for _, h := range s.failed {
		out = append(out, h)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Source < out[j].Source
	})
	return out
}

// Subscribe adds l, and calls l.Engaged for each cluster engaged now.
func (s *Set) Subscribe(l Listener) {
	s.notify.Lock()
	defer s.notify.Unlock()
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	var now []*Cluster
	if s.ctx != nil {
		now = append(now, s.local)
		for _, c := range s.engaged {
			now = append(now, c)
		}
	}
	s.mu.Unlock()
	for _, c := range now {
		l.Engaged(c)
	}
}

// Engage records that t should be engaged, and returns at once: the Set
// connects and probes in the background (see the package documentation's
// guarantees). Engaging a name again from the same source with the same
// version does nothing; with another version, the new target is probed
// and then replaces the old one. It fails for an invalid target, for the
// manager's own name "", and for a name another source engaged (an error
// wrapping ErrDuplicate that names both).
func (s *Set) Engage(t Target) error {
	t, err := Admit(t)
	if err != nil {
		return err
	}
	v := t.version()
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.wishes[t.Name]; w != nil {
		if w.target.Source != t.Source {
			err := fmt.Errorf("cluster %q: %s names it, and %s engaged it first: %w", t.Name, t.Source, w.target.Source, ErrDuplicate)
			s.failLocked(t.Name, t.Source, err)
			return err
		}
		if w.version == v {
			return nil
		}
		if w.cancel != nil {
			w.cancel() // a connection still probing is abandoned
		}
	}
	delete(s.failed, t.Source)
	w := &wish{target: t, version: v, health: Health{Cluster: t.Name, Source: t.Source, State: StateEngaging, Since: time.Now()}}
	s.wishes[t.Name] = w
	if s.ctx != nil {
		s.startLocked(w)
	}
	return nil
}

// Fail records that the target named name from source cannot be engaged.
func (s *Set) Fail(name, source string, err error) {
	if source == "" {
		source = name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(name, source, err)
}

// failLocked records and logs, once per error, that the target named name
// from source cannot be engaged. s.mu must be held.
func (s *Set) failLocked(name, source string, err error) {
	h := Health{Cluster: name, Source: source, State: StateFailed, Since: time.Now(), Err: err.Error()}
	if old, ok := s.failed[source]; ok && old.Err == h.Err {
		return // reported already
	}
	s.failed[source] = h
	s.opts.Logger.Error(err, "cannot engage cluster", "cluster", name, "source", source)
}

// Disengage disengages the cluster named name: its listeners hear
// Disengaged, then its client is fenced (ErrDisengaged) and its cache
// stopped. A connection still probing is abandoned, and failures reported
// for the name are forgotten.
func (s *Set) Disengage(name string) {
	if name == "" {
		return
	}
	s.notify.Lock()
	defer s.notify.Unlock()
	s.mu.Lock()
	if w := s.wishes[name]; w != nil {
		if w.cancel != nil {
			w.cancel()
		}
		delete(s.wishes, name)
	}
	for src, h := range s.failed {
		if h.Cluster == name {
			delete(s.failed, src)
		}
	}
	c := s.engaged[name]
	delete(s.engaged, name)
	listeners := slices.Clone(s.listeners)
	s.mu.Unlock()
	if c != nil {
		s.disengageNotified(c, listeners)
	}
}

// disengageNotified tells listeners of c's disengagement, then fences and
// stops c. s.notify must be held.
func (s *Set) disengageNotified(c *Cluster, listeners []Listener) {
	for _, l := range listeners {
		l.Disengaged(c)
	}
	c.disengage()
	s.opts.Logger.Info("disengaged cluster", "cluster", c.name, "source", c.target.Source)
}

// Run engages the manager's own cluster (its cache must have synced) and
// the targets asked for so far, runs the providers, and engages and
// disengages what they ask for until ctx is done. Then it disengages every
// cluster but the manager's own, waits for the engagements and providers
// to return, and returns the first provider's error, if any.
func (s *Set) Run(ctx context.Context) error {
	s.notify.Lock()
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		s.notify.Unlock()
		return errors.New("cluster: Set.Run called twice")
	}
	s.ctx = ctx
	s.local.setState(StateReady, nil)
	for _, w := range s.wishes {
		s.startLocked(w)
	}
	listeners := slices.Clone(s.listeners)
	s.mu.Unlock()
	for _, l := range listeners {
		l.Engaged(s.local)
	}
	s.notify.Unlock()

	errs := make(chan error, len(s.opts.Providers))
	var providers sync.WaitGroup
	for _, p := range s.opts.Providers {
		providers.Go(func() {
			if err := p.Run(ctx, s); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("cluster provider %T: %w", p, err)
			}
		})
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	providers.Wait()
	s.mu.Lock()
	names := make([]string, 0, len(s.wishes)+len(s.engaged))
	for n := range s.wishes {
		names = append(names, n)
	}
	for n := range s.engaged {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		s.Disengage(n)
	}
	s.wg.Wait()
	return err
}

// startLocked starts w's engagement. s.mu must be held, and Run started.
func (s *Set) startLocked(w *wish) {
	ctx, cancel := context.WithCancel(s.ctx)
	w.cancel = cancel
	s.wg.Go(func() { s.engage(ctx, w) })
}

// Backoff of a cluster's failing engagements: from minBackoff doubling to
// maxBackoff.
const (
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
)

// engage connects w's target until it is engaged, w is replaced or
// withdrawn, or ctx ends; a failed attempt is retried after its backoff.
func (s *Set) engage(ctx context.Context, w *wish) {
	backoff := minBackoff
	for {
		err := s.connect(ctx, w)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		w.health = Health{Cluster: w.target.Name, Source: w.target.Source, State: StateFailed, Since: time.Now(), Err: err.Error()}
		s.mu.Unlock()
		s.opts.Logger.Error(err, "cannot engage cluster; retrying", "cluster", w.target.Name, "source", w.target.Source, "after", backoff)
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect makes w's cluster, starts its cache, probes it and, when w is
// still wanted, engages it in place of the cluster of the same name, if
// any.
func (s *Set) connect(ctx context.Context, w *wish) error {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	release := sync.OnceFunc(func() { <-s.slots })
	defer release()
	// A cluster of an API server other than the manager's has connections
	// of its own anyway: it gets a transport of its own, closed at
	// disengagement; one of the manager's shares its connection.
	c, err := newCluster(w.target, s.opts.Cache, s.opts.Fence, w.target.Config.Host != s.local.cfg.Host)
	if err != nil {
		return err
	}
	s.wg.Go(c.run)
	if err := c.probe(ctx, s.opts.Health.Timeout); err != nil {
		c.disengage()
		return fmt.Errorf("cluster %s: %w", w.target.describe(), err)
	}
	release()

	s.notify.Lock()
	defer s.notify.Unlock()
	s.mu.Lock()
	if s.wishes[w.target.Name] != w || ctx.Err() != nil {
		s.mu.Unlock()
		c.disengage() // replaced or withdrawn meanwhile
		return nil
	}
	old := s.engaged[w.target.Name]
	s.engaged[w.target.Name] = c
	c.setState(StateReady, nil)
	w.health = c.Health()
	listeners := slices.Clone(s.listeners)
	s.mu.Unlock()
	if old != nil {
		s.disengageNotified(old, listeners)
	}
	for _, l := range listeners {
		l.Engaged(c)
	}
	s.opts.Logger.Info("engaged cluster", "cluster", c.name, "source", w.target.Source, "host", c.cfg.Host)
	if s.opts.Health.Interval > 0 {
		s.wg.Go(func() { s.watchHealth(c) })
	}
	return nil
}

// watchHealth probes engaged cluster c every Health.Interval until it is
// disengaged, and tells the HealthListeners when it turns unhealthy and
// healthy again.
func (s *Set) watchHealth(c *Cluster) {
	ticker := time.NewTicker(s.opts.Health.Interval)
	defer ticker.Stop()
	failures := 0
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-ticker.C:
		}
		err := c.probe(c.ctx, s.opts.Health.Timeout)
		switch {
		case c.ctx.Err() != nil:
			return
		case err != nil:
			failures++
			if failures == s.opts.Health.FailureThreshold {
				s.opts.Logger.Error(err, "cluster turned unhealthy; its keys wait", "cluster", c.name, "failures", failures)
				s.tellHealth(c, StateUnhealthy, err)
			}
		default:
			if failures >= s.opts.Health.FailureThreshold {
				s.opts.Logger.Info("cluster is healthy again", "cluster", c.name)
				s.tellHealth(c, StateReady, nil)
			}
			failures = 0
		}
	}
}

// tellHealth records c's state and tells the HealthListeners, while c is
// engaged.
func (s *Set) tellHealth(c *Cluster, state State, err error) {
	s.notify.Lock()
	defer s.notify.Unlock()
	s.mu.Lock()
	engaged := s.engaged[c.name] == c
	listeners := slices.Clone(s.listeners)
	s.mu.Unlock()
	if !engaged {
		return
	}
	c.setState(state, err)
	for _, l := range listeners {
		if hl, ok := l.(HealthListener); ok {
			if state == StateUnhealthy {
				hl.Unhealthy(c)
			} else {
				hl.Healthy(c)
			}
		}
	}
}
