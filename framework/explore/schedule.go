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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
)

// Identities of the fake API server's clients other than the managers.
const (
	scenarioIdentity  = "scenario"
	invariantIdentity = "invariants"
)

const (
	// pollInterval is how often settle looks at the controllers at
	// least; it looks every eighth of its quiet period when that is
	// longer.
	pollInterval = 2 * time.Millisecond
	stopTimeout  = 30 * time.Second
)

// outcome is what one schedule did.
type outcome struct {
	// writes are the writes the server took, in order.
	writes []Write
	// attempts is how many writes of the managers were numbered (see
	// schedule.intercept).
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

// schedule runs the scenario once, on a fresh fake API server or on the
// test control plane, with faults.
type schedule struct {
	opts   Options
	faults []Fault
	plane  plane

	// writeMu serialises the managers' writes, so that their numbering is
	// the server's order and a crash lands exactly after its write.
	writeMu sync.Mutex
	// mu guards the fields below.
	mu        sync.Mutex
	writes    []Write
	attempts  int
	committed int
	// retries are the writes whose last attempt a fault answered (or
	// cut off) instead of the server: the next write of the same manager,
	// verb and object is its retry, which is not numbered.
	retries map[retryKey]bool
	// fired says, for each fault, whether it fired.
	fired []bool
	// crashed receives a manager's identity when a Crash fault fires.
	crashed chan string
	// held is signalled when a Hold fault holds the managers'
	// connection.
	held chan struct{}

	// Owned by the goroutine running the schedule.
	managers int
	current  *managerRun
	lagging  bool
	// holdLag keeps a Lag through the next settle: the step after the
	// lagging one comes before the controllers have seen it.
	holdLag bool
	// holding is set while a Hold fault holds the managers' connection
	// through the next step.
	holding bool
	state   *Snapshot
}

// retryKey names a write for its retry: manager, verb and object.
type retryKey struct {
	manager, verb, kind, namespace, name, subresource string
}

// request is a request as the explorer intercepts it.
type request struct {
	identity, verb               string
	kind                         schema.GroupVersionKind
	namespace, name, subresource string
}

func (r request) isWrite() bool {
	switch r.verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (r request) String() string {
	return fmt.Sprintf("%s %s %s %s/%s", r.verb, r.kind.GroupVersion(), r.kind.Kind, r.namespace, r.name)
}

// managerRun is one started manager.
type managerRun struct {
	identity string
	mgr      *framework.Manager
	cancel   context.CancelFunc
	done     chan error
}

func runSchedule(ctx context.Context, opts Options, faults []Fault) (out *outcome, err error) {
	s := &schedule{opts: opts, faults: faults, crashed: make(chan string, 1), fired: make([]bool, len(faults)),
		held: make(chan struct{}, 1), retries: map[retryKey]bool{}}
	if opts.Envtest != nil {
		s.plane, err = newRealPlane(ctx, s)
	} else {
		s.plane, err = newFakePlane(s)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := s.plane.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scenario, err := s.clients(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.plane.setUp(ctx, scenario); err != nil {
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
	mapper := s.plane.mapper()
	reader, err := client.NewAPIReader(client.Options{Config: s.plane.config(invariantIdentity), Scheme: s.opts.Scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	s.state = &Snapshot{reader: reader, scheme: s.opts.Scheme}
	cache, err := informers.New(s.plane.config(scenarioIdentity), informers.Options{Scheme: s.opts.Scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("explore: scenario cache: %w", err)
	}
	go func() { _ = cache.Start(ctx) }()
	scenario, err := client.New(client.Options{Scheme: s.opts.Scheme, Mapper: mapper, Cache: cache})
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
		expire := s.expireAt(i)
		if expire >= 0 {
			if err := s.plane.(*realPlane).blind(); err != nil {
				return nil, err
			}
		}
		err := recovered(func() error { return step.Do(ctx, scenario) })
		if err != nil && !s.holding && expire < 0 {
			// The step may need the controllers' reaction to the one
			// before, which a lag holds back or which is still on its
			// way to the scenario's cache: let them catch up, and apply
			// it again (twice at most, see settled). A step that fails
			// for good fails all three times.
			what := fmt.Sprintf("step %d (%s)", i, step.Name)
			if s.holdLag {
				what = fmt.Sprintf("step %d (%s)", i-1, steps[i-1].Name)
			}
			s.holdLag = false
			first := err
			b, err2 := s.settled(ctx, what, func() bool {
				err = recovered(func() error { return step.Do(ctx, scenario) })
				return err == nil
			})
			if b != nil || err2 != nil {
				return b, err2
			}
			if err != nil && err.Error() != first.Error() {
				// The first try's error is the cause; a later one may
				// only show what the first left behind.
				err = fmt.Errorf("%w (tried again once the controllers were quiet: %v)", first, err)
			} else if err != nil {
				err = first
			}
		}
		if s.holding {
			// The managers' connection was held through this step: let
			// their held write land now.
			s.holding = false
			s.plane.(*realPlane).release()
		}
		if expire >= 0 {
			if err := s.expire(ctx, expire); err != nil {
				return nil, err
			}
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
			if b, err := s.settle(ctx, fmt.Sprintf("step %d (%s)", i, step.Name), s.plane.quiet()); b != nil || err != nil {
				return b, err
			}
			continue
		}
		s.holdLag = false
		if b, err := s.settleAndCheck(ctx, fmt.Sprintf("step %d (%s)", i, step.Name)); b != nil || err != nil {
			return b, err
		}
		if s.holding {
			// A Hold fault fired: the next step comes while the managers'
			// connection is held (settle checked nothing).
			continue
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
			s.plane.lag(s.current.identity, s.opts.Faults.MaxLag)
		}
	}
}

// expireAt returns the index of the Expire fault of step i, or -1.
func (s *schedule) expireAt(i int) int {
	for k, f := range s.faults {
		if f.Kind == Expire && f.Step == i {
			return k
		}
	}
	return -1
}

// expire ends the Expire fault k, whose step has been applied while the
// managers were cut off: it compacts etcd, breaks the managers'
// connections and lets them reconnect; the fault fired if an informer of
// the current manager relists by the time the controllers are quiet.
func (s *schedule) expire(ctx context.Context, k int) error {
	rp := s.plane.(*realPlane)
	before := relists(s.current.mgr)
	if err := rp.expire(ctx); err != nil {
		return err
	}
	rp.relistsBefore, rp.expireFault = before, k
	return nil
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

// start starts a new manager with Setup.
func (s *schedule) start(ctx context.Context) error {
	s.managers++
	id := fmt.Sprintf("manager-%d", s.managers)
	scheme, err := copyScheme(s.opts.Scheme)
	if err != nil {
		return fmt.Errorf("explore: Options.Scheme: %w", err)
	}
	mgr, err := framework.NewManager(s.plane.config(id), framework.Options{
		Scheme:                  scheme,
		Logger:                  logr.FromSlogHandler(slog.DiscardHandler), // logr.Discard() is the zero Logger: the default
		GracefulShutdownTimeout: -1,                                        // a crash does not drain
		SyncHeapRatio:           -1,                                        // schedules share the process's GC settings
	})
	if err != nil {
		return fmt.Errorf("explore: %s: %w", id, err)
	}
	if err := s.opts.Setup(mgr); err != nil {
		return fmt.Errorf("explore: Setup of %s: %w", id, err)
	}
	if s.lagging {
		s.plane.lag(id, s.opts.Faults.MaxLag)
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
	all := append(s.opts.Invariants[:len(s.opts.Invariants):len(s.opts.Invariants)], s.opts.Converged...)
	var b *broken
	first := true
	if b2, err := s.settled(ctx, what, func() bool {
		if first && s.holding {
			return true // a Hold fault: the next step comes now
		}
		first = false
		b = s.check(ctx, all, what)
		return b == nil
	}); b2 != nil || err != nil {
		return b2, err
	}
	return b, nil
}

// settled waits until the controllers settle (see settle) and runs try;
// if try fails, it waits again, 20 times as long, and runs try once more:
// the controllers' reaction, or its event on the way to the scenario's
// cache, may still be coming. It returns what settle breaks or fails on.
func (s *schedule) settled(ctx context.Context, what string, try func() bool) (*broken, error) {
	for _, quiet := range []time.Duration{s.plane.quiet(), 20 * s.plane.quiet()} {
		if b, err := s.settle(ctx, what, quiet); b != nil || err != nil {
			return b, err
		}
		if try() {
			break
		}
	}
	return nil, nil
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
// managers (checking Invariants while they are down), waits for a
// restarted kube-apiserver, and ends a Lag on the way. When a Hold fault holds the
// managers' connection and a step remains, it returns at once with
// s.holding set.
func (s *schedule) settle(ctx context.Context, what string, quiet time.Duration) (*broken, error) {
	deadline := time.Now().Add(s.opts.ConvergeTimeout)
	var quietSince time.Time
	last, starved := -1, false
	tick := time.NewTicker(max(pollInterval, quiet/8)) // a wait 20 times as long polls less often
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
		case <-s.held:
			if s.state.steps < len(s.opts.Steps) && !s.holdLag {
				s.holding = true
				return nil, nil
			}
			s.plane.(*realPlane).release() // no step left to apply meanwhile
			continue
		default:
		}
		select {
		case err := <-s.current.done:
			return nil, fmt.Errorf("explore: %s stopped by itself during %s: %v", s.current.identity, what, err)
		default:
		}
		s.mu.Lock()
		committed := s.committed
		s.mu.Unlock()
		why := s.busy() // every poll: caughtUp notes an Expire's relist
		now := time.Now()
		if rp, ok := s.plane.(*realPlane); ok && rp.restarting() {
			deadline = now.Add(s.opts.ConvergeTimeout) // it counts from kube-apiserver up again
		}
		switch {
		case why != "" || committed != last || starved:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = now
		case now.Sub(quietSince) >= quiet:
			if !s.lagging || s.holdLag {
				return nil, nil
			}
			s.lagging = false // quiet on stale reads: now let the events through
			s.plane.lag(s.current.identity, 0)
			quietSince, last = time.Time{}, -1
			continue
		}
		last = committed
		if now.After(deadline) {
			return s.notConverged(what, why, starved, quiet, now), nil
		}
		asleep := time.Now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		// Waking later than quiet means this process did not run
		// meanwhile (a busy machine): what it looks at may not have had
		// its turn either, so the quiet starts again.
		starved = time.Since(asleep) > quiet
	}
}

// notConverged is the failure of a settle after what that timed out; why
// is what kept the controllers busy at the last poll ("" if nothing did).
func (s *schedule) notConverged(what, why string, starved bool, quiet time.Duration, now time.Time) *broken {
	switch {
	case why == "" && starved:
		why = fmt.Sprintf("this process woke more than %v late (a busy machine), so the quiet kept starting again", quiet)
	case why == "":
		why = "writes kept coming"
	}
	if rp, ok := s.plane.(*realPlane); ok {
		if n := rp.restartNote(now); n != "" {
			why += "; " + n
		}
	}
	return &broken{what: "convergence", err: fmt.Errorf("after %s, not converged within %v: %s", what, s.opts.ConvergeTimeout, why)}
}

// busy says what keeps the current manager from being settled (see idle
// and plane.caughtUp), or "" if nothing does.
func (s *schedule) busy() string {
	if why := idle(s.current.mgr, s.plane.lastRead); why != "" {
		return why
	}
	return s.plane.caughtUp(s.current)
}

// summary joins up to three reasons.
func summary(reasons []string) string {
	if len(reasons) > 3 {
		reasons = append(reasons[:3:3], fmt.Sprintf("and %d more", len(reasons)-3))
	}
	return strings.Join(reasons, "; ")
}
