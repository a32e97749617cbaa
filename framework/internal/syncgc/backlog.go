package syncgc

import (
	"context"
	"time"
)

// MinHold is the least time Hold keeps the bound after the caches synced
// when the controllers do not work off their backlog sooner; it keeps it as
// long as the sync took when that was longer.
const MinHold = time.Minute

// Look is how often Hold reads the controllers.
const Look = 100 * time.Millisecond

// Listener is what Hold reads of a listener an informer hands events to:
// whether it has been handed every object the informer held when it was
// added (client-go's ResourceEventHandlerRegistration).
type Listener interface{ HasSynced() bool }

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
	Listeners []Listener
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
// restore. It reads the controllers at each of ticks (every Look), and
// the time from now; the caches synced when Hold is called.
func Hold(ctx context.Context, now func() time.Time, ticks <-chan time.Time, restore func(), took time.Duration, look func() []Controller) {
	defer restore()
	b := NewBacklog(now(), took)
	for !b.Drained(now(), look()) {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}
