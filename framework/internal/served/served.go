// Package served watches a kind only while the API server serves it: a
// custom resource whose CRD may be installed after the controller starts,
// or never, or deleted while it runs. It holds the mechanism behind
// framework.WhenServed, whose documentation states the behaviour.
//
// Guarantees:
//
//   - A Kind the API server does not serve at the controller's start holds
//     nothing back: the controller starts without it, and the Kind asks
//     discovery again with backoff (a second, doubling up to 30 seconds)
//     until the kind is served, then binds it and waits for it to sync.
//   - A Kind whose kind goes away (a list or watch found no such resource,
//     and the REST mapper, reset, agrees) removes its listener and stops
//     its informer, then awaits the kind again as at the start.
//   - Served is called with true once the kind is watched and with false
//     once it is found gone, before its informer stops; the requests it
//     returns are queued as changes.
package served

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/reconcile"
)

// pollMin and pollMax bound how long a Kind waits between two questions
// to discovery.
const (
	pollMin = time.Second
	pollMax = 30 * time.Second
)

// Informer is what a Kind needs of the informer of the source it watches.
type Informer interface {
	WaitForSync(ctx context.Context) error
	RemoveListener(reg cache.ResourceEventHandlerRegistration) error
	Stop()
}

// Watch is the source of a Kind bound to its controller, its listener
// added.
type Watch struct {
	Informer Informer
	Reg      cache.ResourceEventHandlerRegistration
	// Name names the bound source in logs.
	Name string
}

// Kind is a source bound to a controller that watches its kind while the
// API server serves it. While the kind is not watched it has no informer:
// it is its own Informer, synced and without listeners. Its fields are set
// before Start and not changed after.
type Kind struct {
	// Name names the source in logs.
	Name string
	GVK  schema.GroupVersionKind
	// Mapper answers whether the kind is served; it is reset, when it is a
	// meta.ResettableRESTMapper, before a kind found gone is asked again.
	Mapper meta.RESTMapper
	// Signals tells the Kind that a list or watch of its kind found no
	// such resource.
	Signals *Signals
	Log     logr.Logger
	// Bind binds the source to the controller and adds its listener.
	Bind func(ctx context.Context) (Watch, error)
	// Served returns the requests to queue once the kind is served (true)
	// or gone (false); nil means none.
	Served func(served bool) []reconcile.Request
	// Queue queues a request as a change.
	Queue func(reconcile.Request)

	mu sync.Mutex
	// current is the source bound to the controller while the kind is
	// watched, nil otherwise; mu guards it.
	current *watch
}

// watch is a Watch, while the kind is served.
type watch struct {
	Watch
	// atStart is set when the controller's start made it: the controller
	// then removes its listener.
	atStart bool
}

var _ Informer = (*Kind)(nil)

func (k *Kind) String() string { return k.Name }

// Start starts the source at once when its kind is served, or the mapper cannot
// tell; otherwise it waits for the kind in the background. Either way the
// kind is then watched, until ctx ends, for going away.
func (k *Kind) Start(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	_, err := k.Mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
	if err != nil && meta.IsNoMatchError(err) {
		k.Log.Info("not watching a kind the API server does not serve; watching it once it is (is its CRD installed?)", "source", k.Name, "kind", k.GVK.String())
		go k.run(ctx, nil)
		return nil, nil
	}
	w, err := k.Bind(ctx)
	if err != nil {
		return nil, err
	}
	sw := &watch{Watch: w, atStart: true}
	k.mu.Lock()
	k.current = sw
	k.mu.Unlock()
	k.queueServed(true)
	go k.run(ctx, sw)
	return w.Reg, nil
}

// run watches the kind for going away while sw watches it, and awaits it
// while it is not served, until ctx ends.
func (k *Kind) run(ctx context.Context, sw *watch) {
	signals, unsubscribe := k.Signals.Subscribe(k.GVK.GroupKind())
	defer unsubscribe()
	for {
		if sw == nil {
			if sw = k.await(ctx); sw == nil {
				return
			}
		}
		if !k.untilGone(ctx, signals) {
			if !sw.atStart {
				_ = sw.Informer.RemoveListener(sw.Reg)
			}
			return
		}
		k.letGo(sw)
		sw = nil
	}
}

// untilGone returns true once the kind is found no longer served, after a
// list or watch found no such resource; false when ctx ended.
func (k *Kind) untilGone(ctx context.Context, signals <-chan struct{}) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-signals:
		}
		if r, ok := k.Mapper.(meta.ResettableRESTMapper); ok {
			r.Reset() // it would remember the kind as served
		}
		_, err := k.Mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
		if err != nil && meta.IsNoMatchError(err) {
			return true
		}
	}
}

// letGo stops watching the kind, which the API server no longer serves:
// served(false) first, which tells the controller's reconciler the kind is
// gone, then the listener and the informer go, and the requests served
// returned are queued.
func (k *Kind) letGo(sw *watch) {
	k.Log.Info("the API server no longer serves a kind: not watching it until it does again (was its CRD deleted?)", "source", k.Name, "kind", k.GVK.String())
	var reqs []reconcile.Request
	if k.Served != nil {
		reqs = k.Served(false)
	}
	k.mu.Lock()
	k.current = nil
	k.mu.Unlock()
	inf := sw.Informer
	_ = inf.RemoveListener(sw.Reg)
	inf.Stop()
	for _, req := range reqs {
		k.Queue(req)
	}
}

// await asks discovery for the kind with backoff until it is served, then
// binds the source, waits for its informer to sync and queues the requests
// Served returns. It returns the watch, or nil when ctx ended or the source
// could not be watched.
func (k *Kind) await(ctx context.Context) *watch {
	delay := pollMin
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		_, err := k.Mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) {
			k.Log.V(1).Info("cannot tell whether the API server serves a kind yet", "source", k.Name, "kind", k.GVK.String(), "error", err.Error())
		}
		delay = min(2*delay, pollMax)
		timer.Reset(delay)
	}
	w, err := k.Bind(ctx)
	if err != nil {
		k.Log.Error(err, "cannot watch a kind the API server now serves", "source", k.String())
		return nil
	}
	sw := &watch{Watch: w}
	if err := w.Informer.WaitForSync(ctx); err != nil {
		_ = w.Informer.RemoveListener(w.Reg)
		if ctx.Err() == nil {
			k.Log.Error(err, "a kind the API server now serves did not sync", "source", k.String())
		}
		return nil
	}
	k.mu.Lock()
	k.current = sw
	k.mu.Unlock()
	k.Log.Info("watching a kind the API server now serves", "source", w.Name)
	k.queueServed(true)
	return sw
}

// queueServed queues the requests served(serving) returns, as changes.
func (k *Kind) queueServed(serving bool) {
	if k.Served == nil {
		return
	}
	for _, req := range k.Served(serving) {
		k.Queue(req)
	}
}

// started returns the watch the controller's start made, while it lasts,
// else nil.
func (k *Kind) started() *watch {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.current == nil || !k.current.atStart {
		return nil
	}
	return k.current
}

// WaitForSync waits for the source's informer when the controller's start started
// it; a kind awaited in the background holds nothing back.
func (k *Kind) WaitForSync(ctx context.Context) error {
	if sw := k.started(); sw != nil {
		return sw.Informer.WaitForSync(ctx)
	}
	return nil
}

// RemoveListener removes the listener Start added, while its informer
// watches; run removes the others.
func (k *Kind) RemoveListener(reg cache.ResourceEventHandlerRegistration) error {
	if sw := k.started(); sw != nil && reg != nil && sw.Reg == reg {
		return sw.Informer.RemoveListener(reg)
	}
	return nil
}

// Stop stops the source's informer when Start made it and it still watches.
func (k *Kind) Stop() {
	if sw := k.started(); sw != nil {
		sw.Informer.Stop()
	}
}

// Signals tells the Kinds that a list or watch of
// their kind found no such resource (the manager's cache reports it). It is
// safe for concurrent use.
type Signals struct {
	mu sync.Mutex
	// subs holds the channels of each kind's subscribers; mu guards it.
	subs map[schema.GroupKind]map[chan struct{}]bool
}

// Subscribe returns a channel that receives (at most one pending signal)
// when a list or watch of gk finds no such resource, and the function
// that unsubscribes it.
func (k *Signals) Subscribe(gk schema.GroupKind) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.subs == nil {
		k.subs = map[schema.GroupKind]map[chan struct{}]bool{}
	}
	if k.subs[gk] == nil {
		k.subs[gk] = map[chan struct{}]bool{}
	}
	k.subs[gk][ch] = true
	return ch, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.subs[gk], ch)
	}
}

// Signal tells gk's subscribers, without blocking.
func (k *Signals) Signal(gk schema.GroupKind) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for ch := range k.subs[gk] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
