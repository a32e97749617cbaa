package informers

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
)

// upstream is the whole kind's watches, as a hub opens them: each opened
// watch is a FakeWatcher, recorded with the version it starts at.
type upstream struct {
	mu      sync.Mutex
	watches []*watch.FakeWatcher
	from    []string
}

func (u *upstream) watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	w := watch.NewFakeWithChanSize(100, false)
	u.watches = append(u.watches, w)
	u.from = append(u.from, opts.ResourceVersion)
	return w, nil
}

func (u *upstream) last() (*watch.FakeWatcher, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.watches[len(u.watches)-1], append([]string(nil), u.from...)
}

// hubObject returns a ConfigMap of the given UID at version rv.
func hubObject(uid string, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm-" + uid, UID: types.UID(uid), ResourceVersion: strconv.Itoa(rv)}}
}

// next returns the next event of w, failing after a minute.
func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(time.Minute):
		t.Fatal("no event within a minute")
		return watch.Event{}, false
	}
}

// waitFor polls until cond holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		runtime.Gosched()
	}
}

func version(t *testing.T, ev watch.Event) string {
	t.Helper()
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("event %s of %T, want a ConfigMap", ev.Type, ev.Object)
	}
	return cm.ResourceVersion
}

// uidIn returns a random UID (as the API server makes them) of bucket.
func uidIn(t *testing.T, b Buckets, bucket int) string {
	for range 1000 {
		if uid := string(uuid.NewUUID()); b.Of(uid) == bucket {
			return uid
		}
	}
	t.Fatalf("no UID in bucket %d", bucket)
	return ""
}

func TestShardHubWatch(t *testing.T) {
	b := Buckets{Field: ShardByUID, Count: 2}
	filters := make([]*shardFilter, 2)
	for i := range filters {
		f, err := compileShard(b.Selector(i))
		if err != nil {
			t.Fatal(err)
		}
		filters[i] = f
	}
	a0, a1 := uidIn(t, b, 0), uidIn(t, b, 1)
	u := &upstream{}
	h := newShardHub()
	opts := func(rv int) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: strconv.Itoa(rv), AllowWatchBookmarks: true}
	}

	w0, err := h.Watch(t.Context(), opts(10), filters[0], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	up, from := u.last()
	up.Add(hubObject(a1, 11)) // bucket 1's: w0 does not see it
	up.Add(hubObject(a0, 12))
	if ev, _ := next(t, w0); version(t, ev) != "12" {
		t.Errorf("bucket 0 got version %s first, want its own object's 12", version(t, ev))
	}

	// A subscriber at a version the watch has passed is served from the
	// events kept, without a second watch.
	w1, err := h.Watch(t.Context(), opts(10), filters[1], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := next(t, w1); version(t, ev) != "11" {
		t.Errorf("bucket 1 got version %s, want the kept 11", version(t, ev))
	}
	if _, from = u.last(); len(from) != 1 {
		t.Errorf("upstream watches opened from %v, want one", from)
	}

	// A bookmark reaches everyone; an event reaches its bucket only.
	up.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "13"}})
	for i, w := range []watch.Interface{w0, w1} {
		if ev, _ := next(t, w); ev.Type != watch.Bookmark || version(t, ev) != "13" {
			t.Errorf("bucket %d got %s %s, want the bookmark at 13", i, ev.Type, version(t, ev))
		}
	}

	// An upstream watch that closes is opened again from its position, and
	// the subscribers go on.
	old := up
	up.Stop()
	waitFor(t, "the upstream watch reopens", func() bool { up, from = u.last(); return up != old })
	if from[len(from)-1] != "13" {
		t.Errorf("upstream watch reopened from %s, want 13", from[len(from)-1])
	}
	up.Modify(hubObject(a0, 14))
	if ev, _ := next(t, w0); ev.Type != watch.Modified || version(t, ev) != "14" {
		t.Errorf("bucket 0 after the reopen got %s %s, want modified 14", ev.Type, version(t, ev))
	}

	// A subscriber older than the kept events restarts the watch from its
	// version; the others skip what they already had.
	for rv := 15; rv < 15+hubReplay; rv++ {
		up.Add(hubObject(uidIn(t, b, 1), rv))
	}
	for rv := 15; rv < 15+hubReplay; rv++ {
		if ev, _ := next(t, w1); version(t, ev) != strconv.Itoa(rv) {
			t.Fatalf("bucket 1 got %s, want %d", version(t, ev), rv)
		}
	}
	w0b, err := h.Watch(t.Context(), opts(12), filters[0], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	up, from = u.last()
	if from[len(from)-1] != "12" {
		t.Errorf("upstream watch opened from %v, want the last from 12", from)
	}
	up.Modify(hubObject(a1, 14)) // replayed by the server: bucket 1 had it
	up.Modify(hubObject(a0, 14))
	up.Modify(hubObject(a1, 15+hubReplay))
	if ev, _ := next(t, w0b); version(t, ev) != "14" {
		t.Errorf("the new subscriber got %s, want 14", version(t, ev))
	}
	if ev, _ := next(t, w1); version(t, ev) != strconv.Itoa(15+hubReplay) {
		t.Errorf("bucket 1 got %s after the restart, want only the new %d", version(t, ev), 15+hubReplay)
	}

	// An error ends every subscriber's watch after it.
	up.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	for i, w := range []watch.Interface{w0, w1, w0b} {
		for {
			ev, ok := next(t, w)
			if !ok {
				t.Errorf("subscriber %d ended without the error", i)
				break
			}
			if ev.Type == watch.Error {
				if _, ok := next(t, w); ok {
					t.Errorf("subscriber %d goes on after the error", i)
				}
				break
			}
		}
	}
	for _, w := range []watch.Interface{w0, w1, w0b} {
		w.Stop()
	}
}

func TestShardHubRefuses(t *testing.T) {
	h := newShardHub()
	f, err := compileShard(Buckets{Field: ShardByUID, Count: 2}.Selector(0))
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{}
	yes := true
	if _, err := h.Watch(t.Context(), metav1.ListOptions{SendInitialEvents: &yes, ResourceVersion: "5"}, f, u.watch); err != errHubStreaming {
		t.Errorf("streaming list = %v, want errHubStreaming", err)
	}
	for _, rv := range []string{"", "0", "abc"} {
		if _, err := h.Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv}, f, u.watch); err == nil {
			t.Errorf("watch from %q succeeded, want an error", rv)
		}
	}
	if len(u.watches) != 0 {
		t.Errorf("refused watches opened %d upstream", len(u.watches))
	}
}

func TestShardHubListsOncePerOptions(t *testing.T) {
	b := Buckets{Field: ShardByUID, Count: 2}
	h := newShardHub()
	release := make(chan struct{})
	var calls sync.WaitGroup
	var mu sync.Mutex
	n := 0
	list := func(context.Context, metav1.ListOptions) (kruntime.Object, error) {
		mu.Lock()
		n++
		mu.Unlock()
		<-release
		l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
		for range 20 {
			l.Items = append(l.Items, *hubObject(string(uuid.NewUUID()), 9))
		}
		return l, nil
	}
	got := make([]*corev1.ConfigMapList, 2)
	call := func(i int) {
		f, err := compileShard(b.Selector(i))
		if err != nil {
			t.Fatal(err)
		}
		calls.Add(1)
		go func() {
			defer calls.Done()
			out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, f, list)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = out.(*corev1.ConfigMapList)
		}()
	}
	call(0)
	waitFor(t, "the first caller lists", func() bool { mu.Lock(); defer mu.Unlock(); return n == 1 })
	call(1)
	waitFor(t, "the second caller joins", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, l := range h.lists {
			return l.joined == 1
		}
		return false
	})
	close(release)
	calls.Wait()
	if n != 1 {
		t.Errorf("two callers at once made %d lists, want 1", n)
	}
	total := 0
	for i, l := range got {
		if l == nil {
			continue
		}
		for _, cm := range l.Items {
			if b.Of(string(cm.UID)) != i {
				t.Errorf("bucket %d's list holds %s of bucket %d", i, cm.UID, b.Of(string(cm.UID)))
			}
		}
		if l.ResourceVersion != "9" {
			t.Errorf("bucket %d's list at %q, want 9", i, l.ResourceVersion)
		}
		total += len(l.Items)
	}
	if total != 20 {
		t.Errorf("the buckets' lists hold %d items, want all 20", total)
	}
}
