package informers

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-dev/converge/sharding"
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

// opened waits for the nth upstream watch and returns it.
func (u *upstream) opened(t *testing.T, n int) *watch.FakeWatcher {
	t.Helper()
	waitFor(t, fmt.Sprintf("upstream watch %d opens", n), func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return len(u.watches) >= n
	})
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.watches[n-1]
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
func uidIn(t *testing.T, b sharding.Buckets, bucket int) string {
	for range 1000 {
		if uid := string(uuid.NewUUID()); b.Of(uid) == bucket {
			return uid
		}
	}
	t.Fatalf("no UID in bucket %d", bucket)
	return ""
}

func TestShardHubWatch(t *testing.T) {
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
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
	h := newShardHub("v1 ConfigMap")
	opts := func(rv int) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: strconv.Itoa(rv), AllowWatchBookmarks: true}
	}

	w0, err := h.Watch(t.Context(), opts(10), filters[0], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	up := u.opened(t, 1)
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
	if _, from := u.last(); len(from) != 1 {
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
	up.Stop()
	up = u.opened(t, 2)
	if _, from := u.last(); from[1] != "13" {
		t.Errorf("upstream watch reopened from %s, want 13", from[len(from)-1])
	}
	up.Modify(hubObject(a0, 14))
	if ev, _ := next(t, w0); ev.Type != watch.Modified || version(t, ev) != "14" {
		t.Errorf("bucket 0 after the reopen got %s %s, want modified 14", ev.Type, version(t, ev))
	}

	// A subscriber whose shard overlaps one subscribed watches alone; the
	// shared watch's objects do not reach it.
	dup, err := h.Watch(t.Context(), opts(14), filters[0], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	alone := u.opened(t, 3)
	up.Modify(hubObject(a0, 15))
	alone.Modify(hubObject(a0, 15))
	if ev, _ := next(t, w0); version(t, ev) != "15" {
		t.Errorf("bucket 0 got %s, want 15", version(t, ev))
	}
	ev, _ := next(t, dup)
	if version(t, ev) != "15" {
		t.Errorf("the overlapping subscriber got %s, want 15 of its own watch", version(t, ev))
	}
	dup.Stop()
	if !alone.IsStopped() {
		t.Error("the overlapping subscriber's own watch goes on after Stop")
	}

	// One older than the events kept watches alone too.
	for rv := 16; rv < 16+hubReplay; rv++ {
		up.Add(hubObject(uidIn(t, b, 1), rv))
	}
	for rv := 16; rv < 16+hubReplay; rv++ {
		if ev, _ := next(t, w1); version(t, ev) != strconv.Itoa(rv) {
			t.Fatalf("bucket 1 got %s, want %d", version(t, ev), rv)
		}
	}
	w0.Stop()
	old, err := h.Watch(t.Context(), opts(12), filters[0], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	alone = u.opened(t, 4)
	if _, from := u.last(); from[3] != "12" {
		t.Errorf("the old subscriber's watch opened from %s, want 12", from[3])
	}
	old.Stop()

	// An error ends every subscriber's watch after it.
	up.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	for {
		ev, ok := next(t, w1)
		if !ok {
			t.Fatal("bucket 1's watch ended without the error")
		}
		if ev.Type == watch.Error {
			if _, ok := next(t, w1); ok {
				t.Error("bucket 1's watch goes on after the error")
			}
			break
		}
	}
	w1.Stop()

	// A new subscriber after it opens a new shared watch, which stops with
	// its last subscriber.
	again, err := h.Watch(t.Context(), opts(20+hubReplay), filters[1], u.watch)
	if err != nil {
		t.Fatal(err)
	}
	up = u.opened(t, 5)
	again.Stop()
	waitFor(t, "the shared watch stops with its last subscriber", up.IsStopped)
}

func TestShardFilterOverlaps(t *testing.T) {
	compile := func(b sharding.Buckets, i int) *shardFilter {
		f, err := compileShard(b.Selector(i))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	two, four := sharding.Buckets{By: sharding.ByUID, Count: 2}, sharding.Buckets{By: sharding.ByUID, Count: 4}
	byNS := sharding.Buckets{By: sharding.ByNamespace, Count: 2}
	for _, c := range []struct {
		name string
		f, g *shardFilter
		want bool
	}{
		{"buckets of one cut", compile(two, 0), compile(two, 1), false},
		{"one bucket", compile(two, 1), compile(two, 1), true},
		{"a quarter in a half", compile(two, 0), compile(four, 1), true},
		{"a quarter beside a half", compile(two, 0), compile(four, 2), false},
		{"the last quarter in the last half", compile(four, 3), compile(two, 1), true},
		{"different fields", compile(two, 0), compile(byNS, 1), true},
	} {
		if got := c.f.overlaps(c.g); got != c.want {
			t.Errorf("%s: overlaps = %v, want %v", c.name, got, c.want)
		}
		if got := c.g.overlaps(c.f); got != c.want {
			t.Errorf("%s, swapped: overlaps = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestShardHubRefuses(t *testing.T) {
	h := newShardHub("v1 ConfigMap")
	f, err := compileShard(sharding.Buckets{By: sharding.ByUID, Count: 2}.Selector(0))
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{}
	yes := true
	if _, err := h.Watch(t.Context(), metav1.ListOptions{SendInitialEvents: &yes, ResourceVersion: "5"}, f, u.watch); err != errHubStreaming {
		t.Errorf("streaming list = %v, want errHubStreaming", err)
	}
	if len(u.watches) != 0 {
		t.Errorf("a refused streaming list opened %d upstream watches", len(u.watches))
	}
	// A watch from "now" or a version the hub cannot order is a watch of
	// its own.
	for i, rv := range []string{"", "0", "abc"} {
		w, err := h.Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv}, f, u.watch)
		if err != nil {
			t.Fatalf("watch from %q: %v", rv, err)
		}
		if _, from := u.last(); len(from) != i+1 || from[i] != rv {
			t.Errorf("watch from %q opened upstream watches from %q", rv, from)
		}
		w.Stop()
		if h.running {
			t.Errorf("watch from %q runs the shared watch", rv)
		}
	}
}

func TestShardHubListsOncePerOptions(t *testing.T) {
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	h := newShardHub("v1 ConfigMap")
	release := make(chan struct{})
	var calls sync.WaitGroup
	var mu sync.Mutex
	n := 0
	list := func(context.Context, metav1.ListOptions, func(string, string) bool) (kruntime.Object, error) {
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
	waitFor(t, "the second caller joins", func() bool { return inFlight(h, func(l *hubList) bool { return len(l.waiters) == 2 }) })
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

func TestShardHubListLeaves(t *testing.T) {
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	f0, err := compileShard(b.Selector(0))
	if err != nil {
		t.Fatal(err)
	}
	h := newShardHub("v1 ConfigMap")
	cancelled := make(chan struct{})
	started := make(chan struct{}, 2)
	list := func(ctx context.Context, _ metav1.ListOptions, _ func(string, string) bool) (kruntime.Object, error) {
		started <- struct{}{}
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := h.List(ctx, metav1.ListOptions{ResourceVersion: "0"}, f0, list)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Errorf("List after its caller left = %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the shared list goes on after its last waiter left")
	}

	// A caller whose shard overlaps a waiter's lists alone.
	release := make(chan struct{})
	n := 0
	var mu sync.Mutex
	slow := func(context.Context, metav1.ListOptions, func(string, string) bool) (kruntime.Object, error) {
		mu.Lock()
		n++
		mu.Unlock()
		<-release
		return &corev1.ConfigMapList{Items: []corev1.ConfigMap{*hubObject(uidIn(t, b, 0), 3), *hubObject(uidIn(t, b, 1), 3)}}, nil
	}
	got := make(chan int, 2)
	for range 2 {
		go func() {
			out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, f0, slow)
			if err != nil {
				t.Error(err)
			}
			got <- len(out.(*corev1.ConfigMapList).Items)
		}()
	}
	waitFor(t, "both callers list", func() bool { mu.Lock(); defer mu.Unlock(); return n == 2 })
	close(release)
	for range 2 {
		if k := <-got; k != 1 {
			t.Errorf("a caller of bucket 0 got %d items, want its 1", k)
		}
	}
}

func TestShardHubReplaysNoObjectTwice(t *testing.T) {
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	fs := filters(t, b)
	f0, f1 := fs[0], fs[1]
	u := &upstream{}
	h := newShardHub("v1 ConfigMap")
	opts := metav1.ListOptions{ResourceVersion: "10"}
	w1, err := h.Watch(t.Context(), opts, f1, u.watch)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Stop()
	w0, err := h.Watch(t.Context(), opts, f0, u.watch)
	if err != nil {
		t.Fatal(err)
	}
	up := u.opened(t, 1)
	up.Add(hubObject(uidIn(t, b, 0), 11))
	if ev, _ := next(t, w0); version(t, ev) != "11" {
		t.Fatalf("bucket 0 got %s, want 11", version(t, ev))
	}
	w0.Stop()
	// Bucket 0's informer made again from version 10 needs the object w0
	// had, which w0's informer may have changed: it watches alone.
	again, err := h.Watch(t.Context(), opts, f0, u.watch)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	alone := u.opened(t, 2)
	if _, from := u.last(); from[1] != "10" {
		t.Errorf("the second watch opened from %s, want 10", from[1])
	}
	alone.Add(hubObject(uidIn(t, b, 0), 11))
	if ev, _ := next(t, again); version(t, ev) != "11" {
		t.Errorf("bucket 0 made again got %s, want 11 from its own watch", version(t, ev))
	}
}

// inFlight reports whether h has a list in flight and cond holds for it.
func inFlight(h *shardHub, cond func(*hubList) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lists {
		return cond(l)
	}
	return false
}

// pagedServer serves a list of n ConfigMaps as the API server does: in
// pages of the request's limit, with a continue token. Its version is 7,
// and grows by one with each expired continue token: the pages after the
// first expire expire times. It records each request. With keeps, it
// decodes as decodeListKeeping does: a page holds only the items the
// list's keep accepts, asked in order (reading, when set, is called
// after the first item of each page was asked about).
type pagedServer struct {
	items   []corev1.ConfigMap
	expire  int
	version int
	keeps   bool
	reading func()

	mu    sync.Mutex
	asks  []metav1.ListOptions
	pages [][]corev1.ConfigMap // each page's items, as served
}

func newPagedServer(n int) *pagedServer {
	s := &pagedServer{version: 7}
	for range n {
		s.items = append(s.items, *hubObject(string(uuid.NewUUID()), 7))
	}
	return s
}

func (s *pagedServer) list(_ context.Context, opts metav1.ListOptions, keep func(string, string) bool) (kruntime.Object, error) {
	s.mu.Lock()
	s.asks = append(s.asks, opts)
	expire := opts.Continue != "" && s.expire > 0
	if expire {
		s.expire--
		s.version++
	}
	version := strconv.Itoa(s.version)
	s.mu.Unlock()
	from := 0
	if opts.Continue != "" {
		if expire {
			return nil, apierrors.NewResourceExpired("the continue token expired")
		}
		var err error
		if from, err = strconv.Atoi(opts.Continue); err != nil || opts.ResourceVersion != "" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("continue %q at version %q", opts.Continue, opts.ResourceVersion))
		}
	}
	to := len(s.items)
	if opts.Limit > 0 {
		to = min(to, from+int(opts.Limit))
	}
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: version}}
	for i, it := range s.items[from:to] {
		if !s.keeps || keep(it.Namespace, string(it.UID)) {
			l.Items = append(l.Items, it)
		}
		if i == 0 && s.reading != nil {
			s.reading()
		}
	}
	if to < len(s.items) {
		l.Continue = strconv.Itoa(to)
		rest := int64(len(s.items) - to)
		l.RemainingItemCount = &rest
	}
	s.mu.Lock()
	s.pages = append(s.pages, l.Items)
	s.mu.Unlock()
	return l, nil
}

func (s *pagedServer) requests() []metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metav1.ListOptions(nil), s.asks...)
}

// checkPart checks that l holds exactly the items of s in bucket of b, in
// order, at s's version and without a continue token.
func checkPart(t *testing.T, s *pagedServer, b sharding.Buckets, bucket int, l kruntime.Object) {
	t.Helper()
	cms, ok := l.(*corev1.ConfigMapList)
	if !ok {
		t.Fatalf("bucket %d got a %T, want a ConfigMapList", bucket, l)
	}
	var want, got []types.UID
	for _, cm := range s.items {
		if b.Of(string(cm.UID)) == bucket {
			want = append(want, cm.UID)
		}
	}
	for _, cm := range cms.Items {
		got = append(got, cm.UID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bucket %d's list holds %d items, want the %d of its bucket in order", bucket, len(got), len(want))
	}
	s.mu.Lock()
	version := strconv.Itoa(s.version)
	s.mu.Unlock()
	if cms.ResourceVersion != version || cms.Continue != "" || cms.RemainingItemCount != nil {
		t.Errorf("bucket %d's list at %q, continue %q, remaining %v; want %s and a whole list", bucket, cms.ResourceVersion, cms.Continue, cms.RemainingItemCount, version)
	}

}

// filters returns the shard filter of each of b's buckets.
func filters(t *testing.T, b sharding.Buckets) []*shardFilter {
	t.Helper()
	var out []*shardFilter
	for i := range b.Count {
		f, err := compileShard(b.Selector(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// listTogether lists s through one hub for each of b's buckets at once,
// bucket i with opts[i], holding the first page back until every caller
// waits for the same list; then it checks each bucket's list.
func listTogether(t *testing.T, s *pagedServer, b sharding.Buckets, opts []metav1.ListOptions) {
	t.Helper()
	h := newShardHub("v1 ConfigMap")
	hold := make(chan struct{})
	var once sync.Once
	gated := func(ctx context.Context, opts metav1.ListOptions, keep func(string, string) bool) (kruntime.Object, error) {
		once.Do(func() { <-hold })
		return s.list(ctx, opts, keep)
	}
	got := make([]kruntime.Object, len(opts))
	fs := filters(t, b)
	var wg sync.WaitGroup
	for i, o := range opts {
		f := fs[i]
		wg.Go(func() {
			out, err := h.List(t.Context(), o, f, gated)
			if err != nil {
				t.Error(err)
			}
			got[i] = out
		})
	}
	waitFor(t, "every caller waits for one list", func() bool { return inFlight(h, func(l *hubList) bool { return len(l.waiters) == len(opts) }) })
	close(hold)
	wg.Wait()
	for i, l := range got {
		checkPart(t, s, b, i, l)
	}
}

func TestShardHubListsInPages(t *testing.T) {
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	fs := filters(t, b)
	f0, f1 := fs[0], fs[1]

	// A shared list at any version: the latest, in pages, each split
	// between the two callers as it comes.
	s := newPagedServer(2*hubPage + 100)
	listTogether(t, s, b, []metav1.ListOptions{{ResourceVersion: "0", Limit: 500}, {ResourceVersion: "0", Limit: 500}})
	asks := s.requests()
	if len(asks) != 3 {
		t.Fatalf("listed %d pages, want 3: %+v", len(asks), asks)
	}
	if asks[0].ResourceVersion != "" || asks[0].Limit != hubPage || asks[0].Continue != "" {
		t.Errorf("first page asked at %q with limit %d, continue %q; want the latest in pages of %d", asks[0].ResourceVersion, asks[0].Limit, asks[0].Continue, hubPage)
	}

	// A caller that comes once the first page is split lists anew: it
	// would have missed that page.
	s = newPagedServer(hubPage + 1)
	h := newShardHub("v1 ConfigMap")
	second := make(chan struct{})
	paused := func(ctx context.Context, opts metav1.ListOptions, keep func(string, string) bool) (kruntime.Object, error) {
		if opts.Continue != "" {
			<-second
		}
		return s.list(ctx, opts, keep)
	}
	done := make(chan kruntime.Object)
	go func() {
		out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, f0, paused)
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	waitFor(t, "the first page is split", func() bool { return inFlight(h, func(l *hubList) bool { return l.split }) })
	// What the first page's split kept are objects of their own: the
	// page's array, other buckets' objects and all, is not kept alive.
	s.mu.Lock()
	page := s.pages[0]
	s.mu.Unlock()
	h.mu.Lock()
	for _, part := range h.lists[pageable(metav1.ListOptions{ResourceVersion: "0"})].parts {
		for _, obj := range part {
			for i := range page {
				if obj == kruntime.Object(&page[i]) {
					t.Errorf("a part kept %s in the page's array", page[i].UID)
				}
			}
		}
	}
	h.mu.Unlock()
	go func() {
		out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, f1, s.list)
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	var late kruntime.Object
	select {
	case late = <-done:
	case <-time.After(time.Minute):
		t.Fatal("a caller that came once the first page was split waits for that list")
	}
	close(second)
	checkPart(t, s, b, 1, late)
	checkPart(t, s, b, 0, <-done)

	// A later page expired: the list is made again in pages from a new
	// first page, then, when that expires too, at once; it holds every
	// object once, at the version of the list that came whole.
	s = newPagedServer(hubPage + 1)
	s.expire = 2
	h = newShardHub("v1 ConfigMap")
	out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, f0, s.list)
	if err != nil {
		t.Fatal(err)
	}
	checkPart(t, s, b, 0, out)
	asks = s.requests()
	if len(asks) != 5 || asks[2].Limit != hubPage || asks[2].Continue != "" || asks[4].Limit != 0 || asks[4].Continue != "" || asks[4].ResourceVersion != "" {
		t.Errorf("after expired pages the requests were %+v, want a new first page, then a whole list of the latest", asks)
	}

	// A reflector's relist at the version it had (no limit: not older
	// than it) is a list of the latest in pages, shared with a list at any
	// version.
	s = newPagedServer(hubPage + 1)
	listTogether(t, s, b, []metav1.ListOptions{{ResourceVersion: "5"}, {ResourceVersion: "0", Limit: 500}})
	if asks := s.requests(); len(asks) != 2 || asks[0].ResourceVersion != "" || asks[0].Limit != hubPage {
		t.Errorf("a relist at version 5 made requests %+v, want pages of the latest", asks)
	}

	// A list at an exact version (a version with a limit) is made as
	// asked, following the pages of the caller's limit.
	s = newPagedServer(30)
	h = newShardHub("v1 ConfigMap")
	out, err = h.List(t.Context(), metav1.ListOptions{ResourceVersion: "5", Limit: 20}, f1, s.list)
	if err != nil {
		t.Fatal(err)
	}
	checkPart(t, s, b, 1, out)
	if asks := s.requests(); len(asks) != 2 || asks[0].ResourceVersion != "5" || asks[0].Limit != 20 || asks[1].Continue != "20" {
		t.Errorf("a list at version 5 with limit 20 made requests %+v, want it as asked and its second page", asks)
	}
}

func TestShardHubDecodesOnlyItsWaitersObjects(t *testing.T) {
	// A list that can read each item's metadata before decoding it (a
	// protobuf list) decodes the objects of the waiters' buckets only.
	b := sharding.Buckets{By: sharding.ByUID, Count: 4}
	s := newPagedServer(2*hubPage + 100)
	s.keeps = true
	listTogether(t, s, b, []metav1.ListOptions{{ResourceVersion: "0"}, {ResourceVersion: "0"}})
	for _, page := range s.pages {
		for _, cm := range page {
			if bucket := b.Of(string(cm.UID)); bucket > 1 {
				t.Fatalf("the list decoded %s, of bucket %d, which no caller waits for", cm.UID, bucket)
			}
		}
	}
}

func TestShardHubCallerArrivingWhileTheFirstPageIsReadListsAnew(t *testing.T) {
	// Once the list has begun to decide which objects of its first page to
	// decode, a caller that joined it would miss its objects of that page:
	// it lists on its own.
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	fs := filters(t, b)
	s := newPagedServer(hubPage + 1)
	s.keeps = true
	reading, resume := make(chan struct{}), make(chan struct{})
	var pages atomic.Int32
	s.reading = func() { // the first page waits; the late caller's list does not
		if pages.Add(1) == 1 {
			close(reading)
			<-resume
		}
	}
	h := newShardHub("v1 ConfigMap")
	first := make(chan kruntime.Object)
	go func() {
		out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, fs[0], s.list)
		if err != nil {
			t.Error(err)
		}
		first <- out
	}()
	<-reading
	lateDone := make(chan kruntime.Object, 1)
	go func() {
		out, err := h.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}, fs[1], s.list)
		if err != nil {
			t.Error(err)
		}
		lateDone <- out
	}()
	var late kruntime.Object
	waitFor(t, "the late caller lists on its own, or joins the first list", func() bool {
		select {
		case late = <-lateDone:
			return true
		default:
			return inFlight(h, func(l *hubList) bool { return len(l.waiters) == 2 })
		}
	})
	close(resume)
	if late == nil {
		late = <-lateDone
	}
	checkPart(t, s, b, 1, late)
	checkPart(t, s, b, 0, <-first)
}
