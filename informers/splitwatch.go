package informers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The API server gzips a watch that starts with a streamed list
// (sendInitialEvents) for as long as it runs, one gzip stream per flush. For
// the initial list that pays; for the single events that follow it costs
// both ends CPU and, for data that does not compress, even bytes. A plain
// watch is never gzipped. So once the streamed list ends, splitWatch moves
// the reflector, unaware, onto a plain watch that starts at the resource
// version of the bookmark closing the list: the events after it are the
// same, in the same order, with none missed.

// splitWatch returns a watch that relays first up to and including the
// bookmark that ends its initial events, then the watch that resume starts
// at that bookmark's resource version. If resume fails, first goes on.
func splitWatch(ctx context.Context, first watch.Interface, resume func(ctx context.Context, rv string) (watch.Interface, error)) watch.Interface {
	s := &splitWatcher{result: make(chan watch.Event), done: make(chan struct{})}
	go s.relay(ctx, first, resume)
	return s
}

type splitWatcher struct {
	result chan watch.Event
	done   chan struct{}
	once   sync.Once
}

func (s *splitWatcher) Stop()                          { s.once.Do(func() { close(s.done) }) }
func (s *splitWatcher) ResultChan() <-chan watch.Event { return s.result }

func (s *splitWatcher) relay(ctx context.Context, cur watch.Interface, resume func(context.Context, string) (watch.Interface, error)) {
	defer close(s.result)
	defer func() { cur.Stop() }() // whichever watch is current at the end
	split := false
	for {
		var ev watch.Event
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case e, ok := <-cur.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		select {
		case s.result <- ev:
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
		if split || ev.Type != watch.Bookmark {
			continue
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
			continue
		}
		split = true
		next, err := resume(ctx, m.GetResourceVersion())
		if err != nil {
			continue // the streamed watch is complete, only dearer
		}
		cur.Stop()
		cur = next
	}
}
