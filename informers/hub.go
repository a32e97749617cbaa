package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// shardHub serves the informers of one kind's buckets (one per shard
// selector, equal but for it) when the API server does not apply shard
// selectors: instead of each listing and watching the whole kind and
// keeping its own part, they share one list at a time and one watch,
// whose objects the hub hands to the bucket they belong to. A member
// holding 16 of 32 buckets then makes one list and one watch of the kind,
// not 16.
//
// Lists with equal options that overlap in time are one request; each
// caller gets a list of its own holding its bucket's items. The watch is
// one upstream watch from the oldest resource version a subscriber asked
// for: a subscriber gets the events newer than its own version that match
// its shard, and every bookmark. A subscriber asking for a version older
// than the watch's position is served from the last hubReplay events when
// they cover it, else the watch restarts from that version (subscribers
// skip what they already had). An error event ends every subscriber's
// watch, as it ends a watch of the API server, and an upstream watch that
// closes is opened again from its position. Streaming lists are not
// shared: the hub refuses them, and reflectors then list.
type shardHub struct {
	mu sync.Mutex
	// watch opens the upstream watch: the last subscriber's.
	// lists are the lists in flight by their options; subs the watch's
	// subscribers; up the upstream watch (nil when none runs), opened from
	// from; pos the newest version it delivered (from, before any);
	// replay the last events delivered, oldest first, and replayFrom the
	// version before the first of them. mu guards them.
	watch      watchFunc
	lists      map[metav1.ListOptions]*hubList
	subs       map[*hubWatch]struct{}
	up         watch.Interface
	upStop     context.CancelFunc
	from, pos  uint64
	replay     []hubEvent
	replayFrom uint64
}

// hubReplay is how many of the latest events a hub keeps for subscribers
// that ask for a version the watch has passed.
const hubReplay = 512

// errHubStreaming refuses a streaming list; the reflector lists instead.
var errHubStreaming = errors.New("informers: streaming lists of shards filtered in the client are not shared; list instead")

// hubList is one list in flight: done is closed when out and err are set;
// joined counts the callers that wait for it besides the one making it,
// and the hub's mu guards it.
type hubList struct {
	done   chan struct{}
	out    runtime.Object
	err    error
	joined int
}

type hubEvent struct {
	ev watch.Event
	rv uint64
}

// listFunc and watchFunc list and watch the whole kind.
type (
	listFunc  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
)

func newShardHub() *shardHub {
	return &shardHub{lists: map[metav1.ListOptions]*hubList{}, subs: map[*hubWatch]struct{}{}}
}

// List lists the kind with list once for every caller with equal opts at
// the time, and returns f's part of it in a list of the caller's own.
func (h *shardHub) List(ctx context.Context, opts metav1.ListOptions, f *shardFilter, list listFunc) (runtime.Object, error) {
	opts.ShardSelector = ""
	h.mu.Lock()
	l, joined := h.lists[opts]
	if joined {
		l.joined++
	} else {
		l = &hubList{done: make(chan struct{})}
		h.lists[opts] = l
	}
	h.mu.Unlock()
	if !joined {
		l.out, l.err = list(context.WithoutCancel(ctx), opts)
		h.mu.Lock()
		delete(h.lists, opts)
		h.mu.Unlock()
		close(l.done)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.err != nil {
		return nil, l.err
	}
	return partOf(l.out, f)
}

// partOf returns a copy of list holding the items f matches. The items are
// copied shallowly: each is in one part only.
func partOf(list runtime.Object, f *shardFilter) (runtime.Object, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	kept := make([]runtime.Object, 0, len(items)/2)
	for _, it := range items {
		if f.matches(it) {
			kept = append(kept, it)
		}
	}
	v := reflect.ValueOf(list)
	if v.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("list %T is not a pointer", list)
	}
	own := reflect.New(v.Elem().Type())
	own.Elem().Set(v.Elem())
	out, ok := own.Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("list %T is not an object", list)
	}
	if err := meta.SetList(out, kept); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch subscribes to the events of f's shard newer than
// opts.ResourceVersion, of the upstream watch watchFn opens when none runs.
func (h *shardHub) Watch(ctx context.Context, opts metav1.ListOptions, f *shardFilter, watchFn watchFunc) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return nil, errHubStreaming
	}
	rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
	if err != nil || rv == 0 {
		return nil, fmt.Errorf("informers: watch from resource version %q: a shared watch starts at a list's version", opts.ResourceVersion)
	}
	opts.ShardSelector, opts.TimeoutSeconds = "", nil // the upstream watch is reopened when it ends
	w := &hubWatch{hub: h, f: f, rv: rv, out: make(chan watch.Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watch = watchFn
	switch {
	case h.up == nil:
		if err := h.openLocked(opts, rv); err != nil {
			return nil, err
		}
	case rv < h.pos && rv >= h.replayFrom && len(h.replay) > 0:
		for _, e := range h.replay {
			w.offerLocked(e)
		}
	case rv < h.pos:
		h.upStop() // its loop sees it was replaced and ends quietly
		if err := h.openLocked(opts, rv); err != nil {
			h.failLocked(err)
			return nil, err
		}
	}
	h.subs[w] = struct{}{}
	go w.pump(ctx)
	return w, nil
}

// hubOpenTimeout bounds how long opening the upstream watch may take (the
// request, not the watch), since the hub's mu is held meanwhile.
const hubOpenTimeout = 30 * time.Second

// openLocked opens the upstream watch from rv. h.mu must be held.
func (h *shardHub) openLocked(opts metav1.ListOptions, rv uint64) error {
	ctx, stop := context.WithCancel(context.Background())
	opts.ResourceVersion = strconv.FormatUint(rv, 10)
	slow := time.AfterFunc(hubOpenTimeout, stop)
	up, err := h.watch(ctx, opts)
	if !slow.Stop() && err == nil {
		up.Stop()
		err = fmt.Errorf("informers: opening the shared watch took more than %v", hubOpenTimeout)
	}
	if err != nil {
		stop()
		return err
	}
	h.up, h.upStop, h.from, h.pos = up, stop, rv, rv
	h.replay, h.replayFrom = h.replay[:0], rv
	go h.loop(up, opts)
	return nil
}

// loop hands the events of up to the subscribers, and opens the watch
// again when up closes without an error.
func (h *shardHub) loop(up watch.Interface, opts metav1.ListOptions) {
	for ev := range up.ResultChan() {
		h.mu.Lock()
		if h.up != up {
			h.mu.Unlock()
			up.Stop()
			return
		}
		if ev.Type == watch.Error {
			h.endLocked(&ev)
			h.mu.Unlock()
			return
		}
		rv := h.pos
		if m, err := meta.Accessor(ev.Object); err == nil {
			if n, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil {
				rv = n
			}
		}
		e := hubEvent{ev: ev, rv: rv}
		h.pos = max(h.pos, rv)
		if len(h.replay) == hubReplay {
			h.replayFrom = h.replay[0].rv
			h.replay = append(h.replay[:0], h.replay[1:]...)
		}
		h.replay = append(h.replay, e)
		for w := range h.subs {
			w.offerLocked(e)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.up != up {
		return
	}
	h.upStop()
	h.up = nil
	if len(h.subs) == 0 {
		return
	}
	if err := h.openLocked(opts, h.pos); err != nil {
		h.failLocked(err)
	}
}

// failLocked ends every subscriber's watch with err. h.mu must be held.
func (h *shardHub) failLocked(err error) {
	status := metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInternalError, Code: 500}
	h.endLocked(&watch.Event{Type: watch.Error, Object: &status})
}

// endLocked stops the upstream watch and ends every subscriber's, after
// last when not nil. h.mu must be held.
func (h *shardHub) endLocked(last *watch.Event) {
	if h.up != nil {
		h.upStop()
		h.up = nil
	}
	for w := range h.subs {
		if last != nil {
			w.pending = append(w.pending, *last)
		}
		w.closed = true
		w.signal()
		delete(h.subs, w)
	}
}

// leave removes w; the upstream watch stops with its last subscriber.
func (h *shardHub) leave(w *hubWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, w)
	if len(h.subs) == 0 && h.up != nil {
		h.upStop()
		h.up = nil
	}
}

// hubWatch is one subscriber's watch of a shardHub.
type hubWatch struct {
	hub  *shardHub
	f    *shardFilter
	out  chan watch.Event
	wake chan struct{}
	done chan struct{}
	once sync.Once

	// rv is the newest version handed to the subscriber (or asked for);
	// pending the events not yet taken; closed is set when the hub ended
	// the watch. The hub's mu guards them.
	rv      uint64
	pending []watch.Event
	closed  bool
}

// offerLocked queues e when it is newer than what w has and in w's shard
// (bookmarks always are). The hub's mu must be held.
func (w *hubWatch) offerLocked(e hubEvent) {
	if e.rv <= w.rv {
		return
	}
	if e.ev.Type != watch.Bookmark && !w.f.matches(e.ev.Object) {
		return
	}
	w.rv = e.rv
	w.pending = append(w.pending, e.ev)
	w.signal()
}

func (w *hubWatch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *hubWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *hubWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.hub.leave(w)
	})
}

// pump hands w's pending events to its reader, in order, until the hub
// ends the watch, the reader stops it or ctx ends.
func (w *hubWatch) pump(ctx context.Context) {
	defer close(w.out)
	for {
		w.hub.mu.Lock()
		batch, closed := w.pending, w.closed
		w.pending = nil
		w.hub.mu.Unlock()
		for _, ev := range batch {
			select {
			case w.out <- ev:
			case <-w.done:
				return
			case <-ctx.Done():
				w.Stop()
				return
			}
		}
		if closed {
			return
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		case <-ctx.Done():
			w.Stop()
			return
		}
	}
}
