package binding

import (
	"context"
	"sync"
	"time"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/internal/restset"
)

// Registry is the Sets of every controller of many clusters of one
// manager, for what hands whole clusters over between processes (the
// manager's sharding ring): it holds a cluster's keys in every controller
// (Quiesce), waits for the cluster's reconciles in flight (Drain) and for
// every controller's informers of a cluster to sync (Synced), and fences
// the reconciles of a cluster by its holding (Holding). Its methods are
// safe for concurrent use; a nil Registry is one without Sets.
type Registry struct {
	// Holding, when not nil, returns the context of this process's
	// holding of the cluster named name, nil when it holds none, and the
	// fence of its writes. A reconcile of the cluster's keys then ends
	// with the holding, its writes to every cluster (the manager's own
	// included) are refused while fence fails, and each is conditional on
	// the object as the reconcile read it (client.WithPreconditions).
	Holding func(name string) (ctx context.Context, fence func() error)

	mu sync.Mutex
	// sets are the registered Sets; changed is closed, and replaced, when
	// a Set binds a cluster or its informers synced. mu guards both.
	sets    []*Set
	changed chan struct{}
}

// NewRegistry returns a Registry whose reconciles are fenced by holding
// (see Registry.Holding).
func NewRegistry(holding func(name string) (context.Context, func() error)) *Registry {
	return &Registry{Holding: holding, changed: make(chan struct{})}
}

// add registers s.
func (r *Registry) add(s *Set) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, s)
}

// notify wakes Synced.
func (r *Registry) notify() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Registry) all() []*Set {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Set(nil), r.sets...)
}

// Quiesce holds the keys of the cluster named name in every controller:
// they stay queued, undispatched, until the cluster is disengaged or
// Resume. It holds them even if the cluster's informers sync later.
func (r *Registry) Quiesce(name string) {
	for _, s := range r.all() {
		s.setQuiesced(name, true)
	}
}

// Resume undoes Quiesce: the cluster's keys flow again once its informers
// synced and while it is healthy.
func (r *Registry) Resume(name string) {
	for _, s := range r.all() {
		s.setQuiesced(name, false)
	}
}

// Drain waits, at most timeout, until no controller runs a reconcile of
// the cluster named name; it returns the controller of each reconcile
// still running then.
func (r *Registry) Drain(name string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	var stuck []string
	for _, s := range r.all() {
		if b := s.Get(name); b != nil {
			for range b.wait(time.Until(deadline)) {
				stuck = append(stuck, s.name)
			}
		}
	}
	return stuck
}

// Synced waits until every controller bound its sources to the cluster
// named name and their informers synced, or ctx ends.
func (r *Registry) Synced(ctx context.Context, name string) error {
	for {
		r.mu.Lock()
		changed, done := r.changed, true
		for _, s := range r.sets {
			if !s.synced(name) {
				done = false
				break
			}
		}
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// fence returns ctx fenced by the holding of the cluster named name, and
// the function that releases it; ok is false when no Holding is set.
func (r *Registry) fence(ctx context.Context, name string) (context.Context, func()) {
	if r == nil || r.Holding == nil {
		return ctx, func() {}
	}
	hctx, check := r.Holding(name)
	ctx = restset.WithWriteFence(ctx, check)
	ctx = client.WithPreconditions(ctx)
	ctx, cancel := context.WithCancel(ctx)
	if hctx == nil {
		cancel() // not held: the reconcile ends at once
		return ctx, cancel
	}
	stop := context.AfterFunc(hctx, cancel)
	return ctx, func() { stop(); cancel() }
}
