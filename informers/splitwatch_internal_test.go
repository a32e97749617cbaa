package informers

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

func endOfList(rv string) *corev1.ConfigMap {
	o := cm("", rv)
	o.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	return o
}

// next reads one event from w or fails.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("result channel closed early")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return watch.Event{}
}

func name(ev watch.Event) string { return ev.Object.(*corev1.ConfigMap).Name }

func TestSplitWatchMovesToAPlainWatchAtTheEndOfTheList(t *testing.T) {
	first, second := watch.NewFake(), watch.NewFake()
	var resumedAt string
	w := splitWatch(t.Context(), first, func(_ context.Context, rv string) (watch.Interface, error) {
		resumedAt = rv
		return second, nil
	})
	defer w.Stop()

	go func() {
		first.Add(cm("listed", "5"))
		first.Action(watch.Bookmark, cm("", "6")) // an ordinary bookmark: no split
		first.Action(watch.Bookmark, endOfList("7"))
	}()
	if got := name(next(t, w)); got != "listed" {
		t.Fatalf("first event %q, want listed", got)
	}
	next(t, w)
	if ev := next(t, w); ev.Type != watch.Bookmark {
		t.Fatalf("third event %v, want the end-of-list bookmark", ev.Type)
	}
	go second.Modify(cm("changed", "8"))
	if got := name(next(t, w)); got != "changed" {
		t.Fatalf("event after the list %q, want changed (from the plain watch)", got)
	}
	if resumedAt != "7" {
		t.Errorf("plain watch started at %q, want the bookmark's 7", resumedAt)
	}
	if !first.IsStopped() {
		t.Error("the streamed watch still runs after the split")
	}
	w.Stop()
	for range w.ResultChan() { // closes once stopped
	}
	if !second.IsStopped() {
		t.Error("Stop left the plain watch running")
	}
}

func TestSplitWatchKeepsTheStreamWhenResumeFails(t *testing.T) {
	first := watch.NewFake()
	w := splitWatch(t.Context(), first, func(context.Context, string) (watch.Interface, error) {
		return nil, errors.New("refused")
	})
	defer w.Stop()
	go func() {
		first.Action(watch.Bookmark, endOfList("7"))
		first.Modify(cm("changed", "8"))
	}()
	next(t, w)
	if got := name(next(t, w)); got != "changed" {
		t.Fatalf("event after a failed resume %q, want changed (from the streamed watch)", got)
	}
	first.Stop()
	if _, ok := <-w.ResultChan(); ok {
		t.Error("result channel open after the streamed watch ended")
	}
}
