package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// shardHub serves the informers of one kind's shards (equal selections but
// for disjoint shard selectors of one field) when the API server does not
// apply shard selectors: instead of each listing and watching the whole
// kind and keeping its own part, they share one watch and the lists they
// make at once, and the hub hands each object to the shard it belongs to.
// A member holding 16 of 32 buckets then makes one watch of the kind, not
// 16.
//
// Lists with equal options made before the first page of one of them came
// are that one list (made in pages, see listInPages), cancelled when its
// last waiter leaves; each caller gets a list of its own holding its
// shard's items. The watch is one upstream watch, opened from the
// version the first subscriber asked for, opened again from its position
// when it ends without an error, and stopped with its last subscriber; no
// lock is held while it is opened. A subscriber gets the events newer than
// its own version that match its shard, and every bookmark; one that asks
// for a version the watch has passed is served from the last hubReplay
// events when they cover it and no other subscriber had the objects it
// needs of them (each object reaches one informer only). An error event
// ends every subscriber's watch, as it ends a watch of the API server.
//
// Whatever cannot be shared is served as before sharing, by a request of
// its own whose objects outside the shard are dropped: a selector that
// overlaps a current subscriber's or waiter's (each object must reach one
// informer only, as informers change the objects they store), and a watch
// from a version that is not a number or older than the events kept (or
// than their objects no subscriber had). A subscriber that falls
// hubPending events behind is ended with "expired", so that it lists
// again. Streaming lists are not shared: the hub refuses them, and
// reflectors then list.
type shardHub struct {
	desc string

	mu sync.Mutex
	// lists are the lists in flight by their options. subs are the watch's
	// subscribers; running is set while the goroutine that runs the
	// upstream watch lives, and stop cancels the upstream watch it has
	// open; watch and opts open it (the last subscriber's). pos is the
	// newest version delivered, or the one the watch was opened from;
	// replay holds the last events delivered (replayed of them, oldest at
	// replayAt), and replayFrom is the version before the first. mu guards
	// them.
	lists      map[metav1.ListOptions]*hubList
	subs       map[*hubWatch]struct{}
	running    bool
	stop       context.CancelFunc
	watch      watchFunc
	opts       metav1.ListOptions
	pos        uint64
	replay     [hubReplay]hubEvent
	replayAt   int
	replayed   int
	replayFrom uint64
}

const (
	// hubReplay is how many of the latest events a hub keeps for
	// subscribers that ask for a version the watch has passed.
	hubReplay = 512
	// hubPending is how many events a subscriber may fall behind before
	// its watch is ended as expired.
	hubPending = 1 << 16
)

// errHubStreaming refuses a streaming list; the reflector lists instead.
var errHubStreaming = errors.New("informers: streaming lists of shards filtered in the client are not shared; list instead")

// listFunc and watchFunc list and watch the whole kind. A listFunc may
// decode only the items keep accepts (by their namespace and UID), calling
// it once per item as it reads them (see decodeListKeeping); it may also
// return every item, which the hub then filters.
type (
	listFunc  func(ctx context.Context, opts metav1.ListOptions, keep func(namespace, uid string) bool) (runtime.Object, error)
	watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
)

// hubList is one list in flight: done is closed once err is set and the
// pages are split. waiters are the shards of the callers waiting for it,
// and parts holds each one's objects so far; split is set once the first
// page was split among them, after which no caller joins (it would miss
// that page). list is an empty list of the kind at the version listed.
// cancel cancels the request, which the last waiter to leave does. The
// hub's mu guards all but done and cancel.
type hubList struct {
	done    chan struct{}
	err     error
	split   bool
	list    runtime.Object
	waiters []*shardFilter
	parts   map[*shardFilter][]runtime.Object
	cancel  context.CancelFunc
}

// hubEvent is an event delivered, with its version (ok when it has one);
// taken is set once a subscriber has its object, which that subscriber's
// informer may change (Options.Transform), so that no other may read it.
type hubEvent struct {
	ev    watch.Event
	rv    uint64
	ok    bool
	taken bool
	// hasMeta is set when the object has metadata, and namespace and uid
	// are its, read once for every subscriber's shard to match.
	hasMeta        bool
	namespace, uid string
}

func newShardHub(desc string) *shardHub {
	return &shardHub{desc: desc, lists: map[metav1.ListOptions]*hubList{}, subs: map[*hubWatch]struct{}{}}
}

// List lists the kind with list once for every caller with equal opts at
// the time, and returns f's part of it in a list of the caller's own.
// The list is made in pages when it can be (see pageable), and each page
// is split among the callers as it comes, so that of the objects outside
// their shards no more than a page is held at once. A caller shares a list
// only until its first page came: buckets claimed at once share one list,
// and a bucket claimed later makes a list of its own.
func (h *shardHub) List(ctx context.Context, opts metav1.ListOptions, f *shardFilter, list listFunc) (runtime.Object, error) {
	opts = pageable(opts)
	key := opts
	key.ShardSelector = ""
	h.mu.Lock()
	l := h.lists[key]
	if l != nil && !l.split && slices.ContainsFunc(l.waiters, f.overlaps) {
		h.mu.Unlock()
		return h.listAlone(ctx, opts, f, list)
	}
	if l == nil || l.split {
		l = h.startListLocked(ctx, key, list)
	}
	l.waiters = append(l.waiters, f)
	h.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		h.mu.Lock()
		defer h.mu.Unlock()
		l.waiters = slices.DeleteFunc(l.waiters, func(g *shardFilter) bool { return g == f })
		delete(l.parts, f)
		if len(l.waiters) == 0 {
			l.cancel()
			if h.lists[key] == l {
				delete(h.lists, key)
			}
		}
		return nil, ctx.Err()
	}
	h.mu.Lock()
	part := l.parts[f]
	delete(l.parts, f)
	h.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	out, err := listOf(l.list, part)
	if err != nil {
		return nil, fmt.Errorf("informers: keep the objects of a shard of the %s listed: %w", h.desc, err)
	}
	return out, nil
}

// startListLocked starts the list of key that callers then join, in place
// of any list of key already split. h.mu must be held.
func (h *shardHub) startListLocked(ctx context.Context, key metav1.ListOptions, list listFunc) *hubList {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &hubList{done: make(chan struct{}), cancel: cancel, parts: map[*shardFilter][]runtime.Object{}}
	h.lists[key] = l
	// keep tells the list which objects to decode: those of the waiters'
	// shards. Once the first page is being read no caller joins: it would
	// miss the objects of that page.
	keep := func(namespace, uid string) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		l.split = true
		return slices.ContainsFunc(l.waiters, func(w *shardFilter) bool { return w.matchesMeta(namespace, uid) })
	}
	go func() {
		empty, err := listInPages(lctx, key, list, keep, func(restart bool, items []runtime.Object) {
			h.mu.Lock()
			defer h.mu.Unlock()
			l.split = true
			if restart {
				clear(l.parts)
			}
			for _, it := range items {
				m, err := meta.Accessor(it)
				if err != nil {
					continue // no metadata: in no shard
				}
				ns, uid := m.GetNamespace(), string(m.GetUID())
				for _, w := range l.waiters {
					if w.matchesMeta(ns, uid) {
						l.parts[w] = append(l.parts[w], own(it))
						break // the waiters' shards are disjoint
					}
				}
			}
		})
		h.mu.Lock()
		l.list, l.err = empty, err
		if h.lists[key] == l {
			delete(h.lists, key)
		}
		h.mu.Unlock()
		cancel()
		close(l.done)
	}()
	return l
}

// listAlone is a list of f's own, with the objects outside f dropped as
// each page comes.
func (h *shardHub) listAlone(ctx context.Context, opts metav1.ListOptions, f *shardFilter, list listFunc) (runtime.Object, error) {
	var kept []runtime.Object
	empty, err := listInPages(ctx, pageable(opts), list, f.matchesMeta, func(restart bool, items []runtime.Object) {
		if restart {
			kept = nil
		}
		for _, it := range items {
			if f.matches(it) {
				kept = append(kept, own(it))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out, err := listOf(empty, kept)
	if err != nil {
		return nil, fmt.Errorf("informers: keep the objects of a shard of the %s listed: %w", h.desc, err)
	}
	return out, nil
}

// own returns a shallow copy of it, a pointer to a struct (such as an item
// of a page's array: the copy keeps the fields' values, not the page's
// array); it itself when it is not one.
func own(it runtime.Object) runtime.Object {
	v := reflect.ValueOf(it)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return it
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	if o, ok := cp.Interface().(runtime.Object); ok {
		return o
	}
	return it
}

// hubPage is how many objects a list of the whole kind asks for at once.
const hubPage = 500

// pageable returns opts as a list of the whole kind in pages of hubPage
// at the latest version, when opts allow a version that new: any version
// ("0"), the latest (""), or one not older than a given one (a version
// with no limit, as a reflector relists, or with ResourceVersionMatch
// NotOlderThan). Other options (an exact version, a limit of the
// caller's) are returned as they are. Equal options then ask for equal
// lists, which the hub shares.
//
// All the pages are at the version of the first. An API server serves the
// first page from its watch cache when it serves consistent reads from it
// (the default since Kubernetes 1.31), and the later pages when it keeps
// snapshots of it (ListFromCacheSnapshot, since 1.34); from etcd
// otherwise. It would serve a list at "0" from its watch cache, whole,
// ignoring the limit.
func pageable(opts metav1.ListOptions) metav1.ListOptions {
	latest := false
	switch opts.ResourceVersionMatch {
	case "":
		_, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		latest = opts.ResourceVersion == "" || opts.ResourceVersion == "0" || (err == nil && opts.Limit == 0)
	case metav1.ResourceVersionMatchNotOlderThan:
		latest = true
	}
	if latest && opts.Continue == "" {
		opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit = "", "", hubPage
	}
	return opts
}

// listInPages lists with list (passing it keep), following the pages a
// limit makes, and hands take the items of each page as it comes; restart
// is set on the
// first page of each attempt, and take then drops what it kept of earlier
// ones. It returns an empty list of the kind at the version listed. When a
// later page has expired, the list is made again from its first page
// (later pages at the new version), and after a second expiry at once.
func listInPages(ctx context.Context, opts metav1.ListOptions, list listFunc, keep func(namespace, uid string) bool, take func(restart bool, items []runtime.Object)) (runtime.Object, error) {
	asked := opts
	asked.Continue = ""
	opts = asked
	var first runtime.Object
	expired := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := list(ctx, opts, keep)
		if err != nil && opts.Continue != "" && apierrors.IsResourceExpired(err) {
			expired++
			opts, first = asked, nil
			if expired > 1 {
				opts.Limit = 0
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(page)
		if err != nil {
			return nil, err
		}
		take(first == nil, items)
		next := lm.GetContinue()
		if first == nil {
			if err := meta.SetList(page, nil); err != nil {
				return nil, err
			}
			lm.SetContinue("")
			lm.SetRemainingItemCount(nil)
			first = page
		}
		if next == "" {
			return first, nil
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
	}
}

// listOf returns a list of its own like empty (a list without items)
// holding items. The items are copied shallowly: each is in one list only
// (callers' shards are disjoint).
func listOf(empty runtime.Object, items []runtime.Object) (runtime.Object, error) {
	out := own(empty)
	if u, ok := empty.(*unstructured.UnstructuredList); ok {
		out = &unstructured.UnstructuredList{Object: runtime.DeepCopyJSON(u.Object)}
	} else if out == empty {
		return nil, fmt.Errorf("list %T is not a pointer to a struct", empty)
	}
	if err := meta.SetList(out, items); err != nil {
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
		return watchAlone(ctx, opts, f, watchFn) // from "now", or a version the hub cannot order
	}
	if w := h.subscribe(ctx, opts, f, watchFn, rv); w != nil {
		return w, nil
	}
	return watchAlone(ctx, opts, f, watchFn)
}

// subscribe adds a subscriber of f from rv, or returns nil when f cannot
// share the watch: it overlaps a subscriber, or rv is older than the
// events kept.
func (h *shardHub) subscribe(ctx context.Context, opts metav1.ListOptions, f *shardFilter, watchFn watchFunc, rv uint64) *hubWatch {
	w := &hubWatch{hub: h, f: f, rv: rv, out: make(chan watch.Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if f.overlaps(s.f) {
			return nil
		}
	}
	switch {
	case !h.running:
		h.pos, h.replayFrom, h.replayAt, h.replayed = rv, rv, 0, 0
		h.running = true
		go h.run()
	case rv >= h.pos:
	case rv >= h.replayFrom:
		for i := range h.replayed {
			if e := h.replay[(h.replayAt+i)%hubReplay]; e.taken && w.wantsLocked(e) {
				return nil // another subscriber had its object: w cannot have it too
			}
		}
		for i := range h.replayed {
			e := &h.replay[(h.replayAt+i)%hubReplay]
			if w.offerLocked(*e, false) && e.ev.Type != watch.Bookmark {
				e.taken = true
			}
		}
	default:
		return nil
	}
	opts.ShardSelector = ""
	h.watch, h.opts = watchFn, opts
	h.subs[w] = struct{}{}
	go w.pump(ctx)
	return w
}

// run runs the upstream watch while the hub has subscribers, opening it
// again from its position when it ends without an error.
func (h *shardHub) run() {
	for {
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		ctx, stop := context.WithCancel(context.Background())
		h.stop = stop
		opts, watchFn := h.opts, h.watch
		opts.ResourceVersion = strconv.FormatUint(h.pos, 10)
		h.mu.Unlock()

		up, err := watchFn(ctx, opts)
		if err != nil && ctx.Err() != nil {
			stop()
			continue // stopped by the last subscriber leaving: see whether one came since
		}
		if err != nil {
			stop()
			h.mu.Lock()
			h.failLocked(fmt.Errorf("informers: watch the %s for its shards: %w", h.desc, err))
			h.running = false
			h.mu.Unlock()
			return
		}
		context.AfterFunc(ctx, up.Stop) // the last subscriber left, or an error ended the hub
		ended := h.deliver(up)
		stop()
		if ended {
			return
		}
	}
}

// deliver hands the events of up to the subscribers until up closes; it
// reports whether an error event ended the hub's watch.
func (h *shardHub) deliver(up watch.Interface) bool {
	for ev := range up.ResultChan() {
		h.mu.Lock()
		if ev.Type == watch.Error {
			h.endLocked(ev)
			h.running = false
			h.mu.Unlock()
			return true
		}
		e := hubEvent{ev: ev}
		if m, err := meta.Accessor(ev.Object); err == nil {
			e.hasMeta, e.namespace, e.uid = true, m.GetNamespace(), string(m.GetUID())
			e.rv, err = strconv.ParseUint(m.GetResourceVersion(), 10, 64)
			e.ok = err == nil
		}
		if e.ok {
			h.pos = max(h.pos, e.rv)
		}
		if h.replayed == hubReplay {
			if old := h.replay[h.replayAt]; old.ok {
				h.replayFrom = old.rv
			} else {
				h.replayFrom = h.pos // what it covered cannot be told
			}
			h.replay[h.replayAt] = e
			h.replayAt = (h.replayAt + 1) % hubReplay
		} else {
			h.replay[(h.replayAt+h.replayed)%hubReplay] = e
			h.replayed++
		}
		given := false
		for w := range h.subs {
			if w.offerLocked(e, given && ev.Type != watch.Bookmark) {
				given = true
			}
		}
		h.replay[(h.replayAt+h.replayed-1)%hubReplay].taken = given && ev.Type != watch.Bookmark
		h.mu.Unlock()
	}
	return false
}

// failLocked ends every subscriber's watch with err. h.mu must be held.
func (h *shardHub) failLocked(err error) {
	status := apierrors.NewInternalError(err).ErrStatus
	h.endLocked(watch.Event{Type: watch.Error, Object: &status})
}

// endLocked stops the upstream watch and ends every subscriber's after
// last, an error event. h.mu must be held.
func (h *shardHub) endLocked(last watch.Event) {
	if h.stop != nil {
		h.stop()
	}
	for w := range h.subs {
		w.endLocked(last)
	}
}

// leave removes w; the upstream watch stops with its last subscriber.
func (h *shardHub) leave(w *hubWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, w)
	if len(h.subs) == 0 && h.stop != nil {
		h.stop()
	}
}
