package binding_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/internal/binding"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/restset"
	"github.com/converge-dev/converge/reconcile"
)

// flowLog records the pauses and resumes of a queue's flows.
type flowLog struct {
	mu    sync.Mutex
	calls []string
}

func (f *flowLog) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}
func (f *flowLog) Add(reconcile.Request)  {}
func (f *flowLog) PauseFlow(flow string)  { f.record("pause " + flow) }
func (f *flowLog) ResumeFlow(flow string) { f.record("resume " + flow) }
func (f *flowLog) DropFlow(string) int    { return 0 }
func (f *flowLog) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

// lateSource is a binding.Source whose informer syncs once synced is
// closed.
type lateSource struct{ synced chan struct{} }

func (s lateSource) String() string { return "late" }
func (s lateSource) Start(context.Context) (cache.ResourceEventHandlerRegistration, error) {
	return reg{}, nil
}
func (s lateSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (s lateSource) RemoveListener(cache.ResourceEventHandlerRegistration) error { return nil }

var errHandedOver = errors.New("handed over")

func TestRegistryHoldsDrainsAndFencesACluster(t *testing.T) {
	cl, err := cluster.New(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	holding, handOver := context.WithCancel(t.Context())
	var fenced error
	var fmu sync.Mutex
	r := binding.NewRegistry(func(name string) (context.Context, func() error) {
		return holding, func() error { fmu.Lock(); defer fmu.Unlock(); return fenced }
	})
	f := &flowLog{}
	synced := make(chan struct{})
	s := binding.New("cms", func(c *cluster.Cluster) (*binding.Binding, error) {
		return &binding.Binding{Cluster: c, Sources: []binding.Source{lateSource{synced}}}, nil
	}, f, logr.Discard(), nil, r)
	s.Start(t.Context())
	s.Engaged(cl)

	// Held before its informers synced: the sync does not let the keys
	// flow.
	r.Quiesce("edge-1")
	close(synced)
	if err := r.Synced(t.Context(), "edge-1"); err != nil {
		t.Fatal(err)
	}
	if got := f.last(); got != "pause edge-1" {
		t.Errorf("after a quiesce and a late sync the flow's last call is %q, want a pause", got)
	}
	r.Resume("edge-1")
	if got := f.last(); got != "resume edge-1" {
		t.Errorf("after Resume the flow's last call is %q, want a resume", got)
	}

	// A reconcile in flight: Drain names its controller until it returns.
	ctx, done, ok := s.Context(t.Context(), "edge-1")
	if !ok {
		t.Fatal("a key of a bound cluster is not reconciled")
	}
	if stuck := r.Drain("edge-1", 50*time.Millisecond); !slices.Equal(stuck, []string{"cms"}) {
		t.Errorf("Drain with a reconcile running = %q, want [cms]", stuck)
	}
	fmu.Lock()
	fenced = errHandedOver
	fmu.Unlock()
	if fence := restset.WriteFence(ctx); fence == nil || !errors.Is(fence(), errHandedOver) {
		t.Errorf("the reconcile's write fence does not refuse once the holding's fence does")
	}
	handOver()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile's context did not end with the holding")
	}
	done()
	if stuck := r.Drain("edge-1", time.Minute); len(stuck) != 0 {
		t.Errorf("Drain once the reconcile returned = %q, want none", stuck)
	}
}
