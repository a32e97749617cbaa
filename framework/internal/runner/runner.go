package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Runnable is what a Group runs: framework.Runnable.
type Runnable interface {
	Start(ctx context.Context) error
}

// Group runs runnables on one context; the first failure is reported on
// errs. Its methods are safe for concurrent use.
type Group struct {
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	errs       chan<- error
	notStopped error

	mu sync.Mutex
	// running holds the runnables that have not returned, and stopErrs the
	// errors wrapping notStopped they returned; mu guards both.
	running  map[*Runnable]bool
	stopErrs []error
}

// New returns a Group running on a context of parent that reports the
// first failure of its runnables on errs (without blocking: a later one
// is dropped). notStopped is the error a runnable that abandoned work of
// its own returns wrapped (framework.ErrNotStopped): Stop returns those
// instead of reporting them, and wraps it in the errors naming the
// runnables it abandoned.
func New(parent context.Context, errs chan<- error, notStopped error) *Group {
	ctx, cancel := context.WithCancel(parent)
	return &Group{ctx: ctx, cancel: cancel, errs: errs, notStopped: notStopped, running: map[*Runnable]bool{}}
}

// Start runs r on the group's context, in a goroutine of its own.
func (g *Group) Start(r Runnable) {
	g.mu.Lock()
	g.running[&r] = true
	g.mu.Unlock()
	g.wg.Go(func() {
		err := r.Start(g.ctx)
		g.mu.Lock()
		delete(g.running, &r)
		if errors.Is(err, g.notStopped) {
			g.stopErrs = append(g.stopErrs, err)
			err = nil
		}
		g.mu.Unlock()
		if err != nil {
			select {
			case g.errs <- err:
			default: // an earlier failure is already stopping the manager
			}
		}
	})
}

// Stop cancels the group's context and waits for its runnables, for at most
// limit (forever when limit is not positive): those still running then are
// abandoned. It returns the errors of runnables that abandoned work of their
// own (controllers abandon stuck reconciles) and names the runnables it
// abandoned, all wrapping notStopped.
func (g *Group) Stop(limit time.Duration) error {
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	if limit <= 0 {
		<-done
	} else {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	errs := append([]error(nil), g.stopErrs...)
	for r := range g.running {
		errs = append(errs, fmt.Errorf("runnable %s did not return within %v of its context's cancellation: %w", describe(*r), limit, g.notStopped))
	}
	return errors.Join(errs...)
}

// describe names r for errors: its name and type, or its type.
func describe(r Runnable) string {
	if n, ok := r.(interface{ Name() string }); ok {
		return fmt.Sprintf("%q (%T)", n.Name(), r)
	}
	return fmt.Sprintf("%T", r)
}
