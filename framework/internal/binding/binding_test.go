package binding_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// flows records the calls a Set makes on a queue's flows.
type flows struct {
	mu     sync.Mutex
	calls  []string
	synced chan struct{} // closed at the first ResumeFlow
	once   sync.Once
	added  chan string // when not nil, hears each Add after it is recorded
}

func (f *flows) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}
func (f *flows) Add(req reconcile.Request) {
	f.record("add " + req.String())
	if f.added != nil {
		f.added <- req.String()
	}
}
func (f *flows) PauseFlow(flow string) { f.record("pause " + flow) }
func (f *flows) ResumeFlow(flow string) {
	f.record("resume " + flow)
	f.once.Do(func() { close(f.synced) })
}
func (f *flows) DropFlow(flow string) int { f.record("drop " + flow); return 0 }

// source is a binding.Source whose Start fails when failing is set.
type source struct {
	name    string
	failing bool
	removed *[]string
}

type reg struct {
	cache.ResourceEventHandlerRegistration
}

func (s source) String() string { return s.name }
func (s source) Start(context.Context) (cache.ResourceEventHandlerRegistration, error) {
	if s.failing {
		return nil, errors.New("no such kind")
	}
	return reg{}, nil
}
func (s source) WaitForSync(context.Context) error { return nil }
func (s source) RemoveListener(cache.ResourceEventHandlerRegistration) error {
	*s.removed = append(*s.removed, s.name)
	return nil
}

func TestDisengagedRemovesTheListenersOfTheSourcesThatStarted(t *testing.T) {
	cl, err := cluster.New(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	f := &flows{synced: make(chan struct{})}
	s := binding.New("cms", func(c *cluster.Cluster) (*binding.Binding, error) {
		return &binding.Binding{Cluster: c, Sources: []binding.Source{
			source{name: "a", removed: &removed},
			source{name: "b", failing: true, removed: &removed},
			source{name: "c", removed: &removed},
		}}, nil
	}, f, logr.Discard(), nil, nil)
	s.Engaged(cl) // before Start: bound then
	if s.Get("edge-1") != nil {
		t.Fatal("a cluster engaged before Start is bound before it")
	}
	s.Start(t.Context())
	<-f.synced
	ctx, done, ok := s.Context(t.Context(), "edge-1")
	if !ok || cluster.From(ctx) != cl {
		t.Fatalf("Context: ok %v, cluster %v; want the engaged cluster", ok, cluster.From(ctx))
	}
	s.Disengaged(cl)
	if ctx.Err() == nil {
		t.Error("a reconcile's context outlived its cluster's engagement")
	}
	done()
	if want := []string{"a", "c"}; !slices.Equal(removed, want) {
		t.Errorf("listeners removed of %v, want %v (the sources that started)", removed, want)
	}
	if want := []string{"pause edge-1", "resume edge-1", "pause edge-1", "drop edge-1"}; !slices.Equal(f.calls, want) {
		t.Errorf("flow calls %v, want %v", f.calls, want)
	}
	if _, _, ok := s.Context(t.Context(), "edge-1"); ok {
		t.Error("a disengaged cluster's key is still reconciled")
	}
}

// A key of a cluster the controller does not watch is dropped, and that is
// logged once per cluster, with its name; once the cluster is bound and
// then disengaged, a dropped key is logged again.
func TestADroppedKeyIsLoggedOncePerCluster(t *testing.T) {
	cl, err := cluster.New(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(_, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "dropped a key") && strings.Contains(l, `"cluster"="`+name+`"`) {
				n++
			}
		}
		return n
	}
	f := &flows{synced: make(chan struct{})}
	s := binding.New("cms", func(c *cluster.Cluster) (*binding.Binding, error) {
		return &binding.Binding{Cluster: c}, nil
	}, f, log, nil, nil)
	s.Start(t.Context())
	for range 3 {
		if _, _, ok := s.Context(t.Context(), "ghost"); ok {
			t.Fatal("a key of a cluster never engaged is reconciled")
		}
	}
	if n := count("ghost"); n != 1 {
		t.Errorf("the dropped keys of ghost were logged %d times, want once: %q", n, lines)
	}
	s.Engaged(cl)
	<-f.synced
	s.Disengaged(cl)
	s.Context(t.Context(), "edge-1")
	s.Context(t.Context(), "edge-1")
	if n := count("edge-1"); n != 1 {
		t.Errorf("the dropped keys of the disengaged edge-1 were logged %d times, want once: %q", n, lines)
	}
}

// HoldLocal pauses the manager's own cluster's flow until lead closes,
// and holds nothing for a nil lead.
func TestHoldLocalPausesTheOwnClusterUntilLeading(t *testing.T) {
	f := &flows{synced: make(chan struct{})}
	s := binding.New("c", nil, f, logr.Discard(), nil, nil)
	s.HoldLocal(t.Context(), nil)
	if len(f.calls) != 0 {
		t.Fatalf("a nil lead held %v", f.calls)
	}
	lead := make(chan struct{})
	s.HoldLocal(t.Context(), lead)
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	if !slices.Equal(calls, []string{"pause "}) {
		t.Fatalf("before leading: %q, want the own cluster's flow paused", calls)
	}
	close(lead)
	<-f.synced // resumed
	if !slices.Equal(f.calls, []string{"pause ", "resume "}) {
		t.Errorf("after leading: %q, want it resumed", f.calls)
	}
	var none *binding.Set
	none.HoldLocal(t.Context(), lead) // a controller of the own cluster only
}

// A synced cluster that turns healthy again after its probes failed
// queues OnEngaged's requests anew, so that what waited for it goes on; a
// Healthy that follows no Unhealthy queues nothing.
func TestOnEngagedQueuesAgainWhenTheClusterTurnsHealthy(t *testing.T) {
	cl, err := cluster.New(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan string, 10)
	f := &flows{synced: make(chan struct{}), added: make(chan string, 10)}
	s := binding.New("cms", func(c *cluster.Cluster) (*binding.Binding, error) {
		return &binding.Binding{Cluster: c}, nil
	}, f, logr.Discard(), func(ctx context.Context, c *cluster.Cluster) []reconcile.Request {
		called <- cluster.From(ctx).Name()
		return []reconcile.Request{{Namespace: "ns", Name: "waiting"}}
	}, nil)
	s.Start(t.Context())
	s.Engaged(cl)
	if got := <-called; got != "edge-1" { // once synced
		t.Fatalf("OnEngaged's context carries cluster %q, want edge-1", got)
	}
	<-f.added
	s.Healthy(cl) // no Unhealthy before it
	s.Unhealthy(cl)
	s.Healthy(cl)
	close(called)
	var again []string
	for name := range called {
		again = append(again, name)
	}
	if want := []string{"edge-1"}; !slices.Equal(again, want) {
		t.Errorf("after the sync, OnEngaged was called for %v, want %v (once healthy again)", again, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{"pause edge-1", "resume edge-1", "add edge-1:ns/waiting", "resume edge-1", "pause edge-1", "resume edge-1", "add edge-1:ns/waiting"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("flow calls %v, want %v", f.calls, want)
	}
}
