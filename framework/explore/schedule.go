package explore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
)

// Identities of the fake API server's clients other than the managers.
const (
	scenarioIdentity  = "scenario"
	invariantIdentity = "invariants"
)

// Quiet periods: how long the controllers must stay idle, with no write
// committed, to count as converged; a broken invariant is checked again
// after the longer one before it fails the schedule, so an event still on
// its way to a cache does not raise a false alarm.
const (
	quietPeriod   = 15 * time.Millisecond
	confirmPeriod = 300 * time.Millisecond
	pollInterval  = 2 * time.Millisecond
	stopTimeout   = 30 * time.Second
)

// outcome is what one schedule did.
type outcome struct {
	// writes are the writes the server took, in order.
	writes []Write
	// attempts is how many writes the managers sent.
	attempts int
	// fired says, for each fault of the schedule, whether it fired.
	fired []bool
	// broken is the first property the schedule broke; nil if none.
	broken *broken
}

// broken is a property a schedule broke: an invariant's name,
// "convergence", "deletes" or "scenario", and why.
type broken struct {
	what string
	err  error
}

// schedule runs the scenario once on a fresh fake API server with faults.
type schedule struct {
	opts   Options
	faults []Fault
	srv    *fake.Server
	mapper meta.RESTMapper

	// writeMu serialises the managers' writes, so that their numbering is
	// the server's order and a crash lands exactly after its write.
	writeMu sync.Mutex
	// mu guards the fields below.
	mu        sync.Mutex
	writes    []Write
	attempts  int
	committed int
	// fired says, for each fault, whether it fired.
	fired []bool
	// crashed receives a manager's identity when a Crash fault fires.
	crashed chan string

	// Owned by the goroutine running the schedule.
	managers int
	current  *managerRun
	lagging  bool
	// holdLag keeps a Lag through the next settle: the step after the
	// lagging one comes before the controllers have seen it.
	holdLag bool
	state   *Snapshot
}

// managerRun is one started manager.
type managerRun struct {
	identity string
	mgr      *framework.Manager
	cancel   context.CancelFunc
	done     chan error
}

func runSchedule(ctx context.Context, opts Options, faults []Fault) (out *outcome, err error) {
	srv, err := fake.NewServer(fake.Options{Scheme: opts.Scheme, CRDs: opts.CRDs, ClusterScoped: opts.ClusterScoped, Objects: opts.Objects})
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	defer srv.Close()
	s := &schedule{opts: opts, faults: faults, srv: srv, crashed: make(chan string, 1), fired: make([]bool, len(faults))}
	srv.Intercept(s.intercept)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scenario, err := s.clients(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := s.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	out = &outcome{}
	defer func() {
		s.mu.Lock()
		out.writes, out.attempts, out.fired = s.writes, s.attempts, slices.Clone(s.fired)
		s.mu.Unlock()
	}()
	out.broken, err = s.scenario(ctx, scenario)
	return out, err
}

// clients sets up the invariants' reader and returns the scenario's
// client, with a cache of its own.
func (s *schedule) clients(ctx context.Context) (*client.Client, error) {
	var err error
	if s.mapper, err = informers.NewRESTMapper(s.srv.ConfigAs(invariantIdentity), nil); err != nil {
		return nil, fmt.Errorf("explore: discovery on the fake API server: %w", err)
	}
	reader, err := client.NewAPIReader(client.Options{Config: s.srv.ConfigAs(invariantIdentity), Scheme: s.opts.Scheme, Mapper: s.mapper})
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	s.state = &Snapshot{reader: reader, scheme: s.opts.Scheme}
	cache, err := informers.New(s.srv.ConfigAs(scenarioIdentity), informers.Options{Scheme: s.opts.Scheme, Mapper: s.mapper})
	if err != nil {
		return nil, fmt.Errorf("explore: scenario cache: %w", err)
	}
	go func() { _ = cache.Start(ctx) }()
	scenario, err := client.New(client.Options{Scheme: s.opts.Scheme, Mapper: s.mapper, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("explore: scenario client: %w", err)
	}
	return scenario, nil
}

// scenario applies the steps, waiting for the controllers and checking
// the invariants after each, and returns the first property broken.
func (s *schedule) scenario(ctx context.Context, scenario *client.Client) (*broken, error) {
	if b, err := s.settleAndCheck(ctx, "the start"); b != nil || err != nil {
		return b, err
	}
	steps := s.opts.Steps
	for i, step := range steps {
		s.startLag(i)
		err := recovered(func() error { return step.Do(ctx, scenario) })
		if err != nil && s.holdLag {
			// The step may need the controllers' reaction to the one
			// before, which the lag holds back: let them catch up, and
			// apply it again.
			s.holdLag = false
			if b, err := s.settle(ctx, fmt.Sprintf("step %d (%s)", i-1, steps[i-1].Name), quietPeriod); b != nil || err != nil {
				return b, err
			}
			err = recovered(func() error { return step.Do(ctx, scenario) })
		}
		if err != nil {
			return &broken{what: "scenario", err: fmt.Errorf("step %d (%s): %w", i, step.Name, err)}, nil
		}
		s.state.steps = i + 1
		if s.lagging && !s.holdLag && i+1 < len(steps) {
			// The next step comes while the controllers still lag behind
			// this one: wait for quiet, keep the events held, check nothing
			// (the controllers have not seen the step).
			s.holdLag = true
			if b, err := s.settle(ctx, fmt.Sprintf("step %d (%s)", i, step.Name), quietPeriod); b != nil || err != nil {
				return b, err
			}
			continue
		}
		s.holdLag = false
		if b, err := s.settleAndCheck(ctx, fmt.Sprintf("step %d (%s)", i, step.Name)); b != nil || err != nil {
			return b, err
		}
	}
	return nil, nil
}

// startLag starts the Lag fault of step i, if any.
func (s *schedule) startLag(i int) {
	for k, f := range s.faults {
		if f.Kind == Lag && f.Step == i && !s.lagging {
			s.lagging = true
			s.mu.Lock()
			s.fired[k] = true
			s.mu.Unlock()
			s.srv.LagWatches(s.current.identity, s.opts.Faults.MaxLag)
		}
	}
}

// recovered calls f, turning a panic in it (a user's step or invariant)
// into an error.
func recovered(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// intercept records every write, injects the Conflict and ServerError
// faults, and fires the Crash faults.
func (s *schedule) intercept(req fake.Request, serve func() int) error {
	if !req.IsWrite() {
		serve()
		return nil
	}
	w := Write{Manager: req.Identity, Verb: req.Verb, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name, Subresource: req.Subresource}
	if req.Identity == scenarioIdentity {
		w.Manager = ""
		w.Code = serve()
		s.record(w)
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.mu.Unlock()
	w.attempt = n
	for i := range s.faults {
		f := &s.faults[i]
		if f.Write != n || f.Kind != Conflict && f.Kind != ServerError {
			continue
		}
		s.mu.Lock()
		s.fired[i] = true
		s.mu.Unlock()
		w.Injected = f
		if f.Kind == Conflict {
			w.Code = 409
			s.record(w)
			return apiConflict(req)
		}
		w.Code = 500
		s.record(w)
		return apiInternal(req)
	}
	w.Code = serve()
	s.record(w)
	if !w.Committed() {
		return nil
	}
	for i, f := range s.faults {
		if f.Kind == Crash && f.Write == n {
			s.mu.Lock()
			s.fired[i] = true
			s.mu.Unlock()
			s.srv.CrashAfter(req.Identity, 0)
			select {
			case s.crashed <- req.Identity:
			default:
			}
		}
	}
	return nil
}

func (s *schedule) record(w Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
	if w.Committed() {
		s.committed++
	}
}

// start starts a new manager with Setup.
func (s *schedule) start(ctx context.Context) error {
	s.managers++
	id := fmt.Sprintf("manager-%d", s.managers)
	scheme, err := copyScheme(s.opts.Scheme)
	if err != nil {
		return fmt.Errorf("explore: Options.Scheme: %w", err)
	}
	mgr, err := framework.NewManager(s.srv.ConfigAs(id), framework.Options{
		Scheme:                  scheme,
		Logger:                  logr.FromSlogHandler(slog.DiscardHandler), // logr.Discard() is the zero Logger: the default
		GracefulShutdownTimeout: -1,                                        // a crash does not drain
		SyncGCPercent:           -1,                                        // schedules share the process's GC settings
	})
	if err != nil {
		return fmt.Errorf("explore: %s: %w", id, err)
	}
	if err := s.opts.Setup(mgr); err != nil {
		return fmt.Errorf("explore: Setup of %s: %w", id, err)
	}
	if s.lagging {
		s.srv.LagWatches(id, s.opts.Faults.MaxLag)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &managerRun{identity: id, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	s.current = r
	return nil
}

// stop cancels the current manager and waits for it to stop.
func (s *schedule) stop() error {
	r := s.current
	if r == nil {
		return nil
	}
	s.current = nil
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, framework.ErrNotStopped) && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("explore: %s stopped with: %w", r.identity, err)
		}
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("explore: %s did not stop %v after its context was cancelled", r.identity, stopTimeout)
	}
}

// settleAndCheck waits for the controllers to converge after what (a
// step, or the start), then checks the invariants; a broken one is
// checked again after a longer quiet period before it counts.
func (s *schedule) settleAndCheck(ctx context.Context, what string) (*broken, error) {
	if b, err := s.settle(ctx, what, quietPeriod); b != nil || err != nil {
		return b, err
	}
	all := append(s.opts.Invariants[:len(s.opts.Invariants):len(s.opts.Invariants)], s.opts.Converged...)
	b := s.check(ctx, all, what)
	if b == nil {
		return nil, nil
	}
	if b2, err := s.settle(ctx, what, confirmPeriod); b2 != nil || err != nil {
		return b2, err
	}
	return s.check(ctx, all, what), nil
}

func (s *schedule) check(ctx context.Context, invs []Invariant, when string) *broken {
	s.mu.Lock()
	s.state.writes = s.writes
	s.mu.Unlock()
	for _, inv := range invs {
		if err := recovered(func() error { return inv.Check(ctx, s.state) }); err != nil {
			return &broken{what: inv.Name, err: fmt.Errorf("after %s: %w", when, err)}
		}
	}
	return nil
}

// settle waits until the current manager's controllers have been idle
// (see idle), with no write committed, for quiet; it restarts crashed
// managers (checking Invariants while they are down) and ends a Lag on
// the way.
func (s *schedule) settle(ctx context.Context, what string, quiet time.Duration) (*broken, error) {
	deadline := time.Now().Add(s.opts.ConvergeTimeout)
	var quietSince time.Time
	last := -1
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case id := <-s.crashed:
			if err := s.stop(); err != nil {
				return nil, err
			}
			if b := s.check(ctx, s.opts.Invariants, fmt.Sprintf("%s crashed during %s", id, what)); b != nil {
				return b, nil
			}
			if err := s.start(ctx); err != nil {
				return nil, err
			}
			deadline, quietSince, last = time.Now().Add(s.opts.ConvergeTimeout), time.Time{}, -1
			continue
		default:
		}
		why := idle(s.current.mgr)
		if why == "" && !s.srv.WatchesCaughtUp(s.current.identity) {
			why = "watch events are on their way to " + s.current.identity
		}
		select {
		case err := <-s.current.done:
			return nil, fmt.Errorf("explore: %s stopped by itself during %s: %v", s.current.identity, what, err)
		default:
		}
		s.mu.Lock()
		committed := s.committed
		s.mu.Unlock()
		now := time.Now()
		switch {
		case why != "" || committed != last:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = now
		case now.Sub(quietSince) >= quiet:
			if !s.lagging || s.holdLag {
				return nil, nil
			}
			s.lagging = false // quiet on stale reads: now let the events through
			s.srv.LagWatches(s.current.identity, 0)
			quietSince, last = time.Time{}, -1
			continue
		}
		last = committed
		if now.After(deadline) {
			if why == "" {
				why = "writes kept coming"
			}
			return &broken{what: "convergence", err: fmt.Errorf("after %s, not converged within %v: %s", what, s.opts.ConvergeTimeout, why)}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// summary joins up to three reasons.
func summary(reasons []string) string {
	if len(reasons) > 3 {
		reasons = append(reasons[:3:3], fmt.Sprintf("and %d more", len(reasons)-3))
	}
	return strings.Join(reasons, "; ")
}
