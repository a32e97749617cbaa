package syncgc

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// MinHold is the least time Hold keeps the bound after the caches synced
// when the controllers do not work off their backlog sooner; it keeps it as
// long as the sync took when that was longer.
const MinHold = time.Minute

// Look is how often Hold reads the controllers.
const Look = 100 * time.Millisecond

// Controller is what Hold reads of one controller that runs in the process
// now (or is about to start), at each look.
type Controller struct {
	// Name tells controllers apart from one look to the next.
	Name string
	// Running is true once its workers take keys.
	Running bool
	// Listeners are its sources' listeners once it runs (nil for a source
	// that adds none): a listener added to a synced informer is handed
	// every cached object first.
	Listeners []cache.ResourceEventHandlerRegistration
	// Reconciles counts the reconciles it has begun since it started.
	Reconciles uint64
	// Objects is the number of objects its own informer holds, as its
	// listeners counted them (so, until they were handed every cached
	// object, fewer).
	Objects int
	// Queued is the number of keys waiting for a worker, not counting those
	// waiting for a delay (a retry's backoff, RequeueAfter).
	Queued int
}

// Backlog tells when the controllers have worked off the backlog the
// caches' sync queued: every key of every object, at once. A controller has
// worked it off once its listeners were handed every cached object and it
// has begun as many reconciles as its informer holds objects (retries
// count, so a controller whose reconciles all fail gets there too), or was
// idle for a look: no key waiting at two looks in a row and no reconcile
// begun between them (its predicates or its shard let fewer keys through).
// A controller that stops or is not run is not waited for. Backlog is used
// by one goroutine.
type Backlog struct {
	deadline time.Time
	// last is each controller's previous look; done the controllers that
	// worked their backlog off.
	last map[string]Controller
	done map[string]bool
}

// NewBacklog returns the Backlog of caches that synced at synced, after
// taking took to: the bound is lifted at the latest at synced plus took, or
// plus MinHold if that is later.
func NewBacklog(synced time.Time, took time.Duration) *Backlog {
	return &Backlog{
		deadline: synced.Add(max(took, MinHold)),
		last:     map[string]Controller{},
		done:     map[string]bool{},
	}
}

// Drained reports whether the bound may be lifted at now, given the
// controllers that run (or are about to) now: every one of them has worked
// its backlog off, or the deadline has passed.
func (b *Backlog) Drained(now time.Time, cs []Controller) bool {
	drained := true
	for _, c := range cs {
		if !b.drained(c) {
			drained = false // look at the others too: idleness spans two looks
		}
	}
	return drained || !now.Before(b.deadline)
}

func (b *Backlog) drained(c Controller) bool {
	if b.done[c.Name] {
		return true
	}
	last, seen := b.last[c.Name]
	b.last[c.Name] = c
	if !c.Running {
		return false
	}
	for _, l := range c.Listeners {
		if l != nil && !l.HasSynced() { // a source that adds no listener has none
			return false
		}
	}
	idle := seen && last.Running && last.Queued == 0 && c.Queued == 0 && last.Reconciles == c.Reconciles
	b.done[c.Name] = c.Reconciles >= uint64(max(c.Objects, 0)) || idle
	return b.done[c.Name]
}

// Hold keeps the bound restore lifts until the controllers look returns
// have worked off the caches' backlog (see Backlog), or the caches' sync
// plus took (at least MinHold) is past, or ctx is done; then it calls
// restore. It reads the controllers every Look, on clk; the caches synced
// when Hold is called.
func Hold(ctx context.Context, clk clock.WithTicker, restore func(), took time.Duration, look func() []Controller) {
	defer restore()
	b := NewBacklog(clk.Now(), took)
	tick := clk.NewTicker(Look)
	defer tick.Stop()
	for !b.Drained(clk.Now(), look()) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}
