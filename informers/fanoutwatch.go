package informers

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// hubWatch is one subscriber's watch of a shardHub.
type hubWatch struct {
	hub  *shardHub
	f    *shardFilter
	out  chan watch.Event
	wake chan struct{}
	done chan struct{}
	once sync.Once

	// rv is the newest version handed to the subscriber (or asked for);
	// pending the events not yet taken; ended is set when the hub ended
	// the watch. The hub's mu guards them.
	rv      uint64
	pending []watch.Event
	ended   bool
}

// offerLocked queues e when it is newer than what w has and in w's shard
// (bookmarks always are), a deep copy of its object when copied is set
// (another subscriber has it), and reports whether it did. The hub's mu
// must be held.
func (w *hubWatch) offerLocked(e hubEvent, copied bool) bool {
	switch {
	case !w.wantsLocked(e):
		return false
	case len(w.pending) >= hubPending:
		w.endLocked(watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired(fmt.Sprintf(
			"the %s's shard fell %d events behind the shared watch", w.hub.desc, hubPending)).ErrStatus})
		return false
	}
	ev := e.ev
	if copied {
		ev.Object = ev.Object.DeepCopyObject()
	}
	if e.ok {
		w.rv = e.rv
	}
	w.pending = append(w.pending, ev)
	w.signal()
	return true
}

// wantsLocked reports whether e is newer than what w has and in w's shard
// (bookmarks always are). The hub's mu must be held.
func (w *hubWatch) wantsLocked(e hubEvent) bool {
	switch {
	case w.ended || e.ok && e.rv <= w.rv:
		return false
	case e.ev.Type != watch.Bookmark && !(e.hasMeta && w.f.matchesMeta(e.namespace, e.uid)):
		return false
	}
	return true
}

// endLocked ends w after last and removes it from the hub. The hub's mu
// must be held.
func (w *hubWatch) endLocked(last watch.Event) {
	w.pending = append(w.pending, last)
	w.ended = true
	w.signal()
	delete(w.hub.subs, w)
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
		batch, ended := w.pending, w.ended
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
		if ended {
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

// watchAlone is a watch of f's own, passing on the events of the whole
// kind's whose object is in f, and every bookmark and error.
func watchAlone(ctx context.Context, opts metav1.ListOptions, f *shardFilter, watchFn watchFunc) (watch.Interface, error) {
	w, err := watchFn(ctx, opts)
	if err != nil {
		return nil, err
	}
	fw := &filteredWatch{in: w, out: make(chan watch.Event), done: make(chan struct{}), f: f}
	go fw.loop()
	return fw, nil
}

// filteredWatch is watch.Filter that also ends when stopped while its
// reader has gone.
type filteredWatch struct {
	in   watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
	f    *shardFilter
}

func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *filteredWatch) Stop() {
	w.once.Do(func() { close(w.done) })
	w.in.Stop()
}

func (w *filteredWatch) loop() {
	defer close(w.out)
	for ev := range w.in.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if !w.f.matches(ev.Object) {
				continue
			}
		}
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
	}
}
