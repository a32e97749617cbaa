package framework_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// fleet is a manager on one fake API server with a provider whose
// Engager the test drives.
type fleet struct {
	mgr     *framework.Manager
	engager chan cluster.Engager
}

// newFleet starts nothing: it builds a manager on local whose provider
// hands its Engager to f.engager once the manager runs.
func newFleet(t *testing.T, local *fake.Server) *fleet {
	return newFleetWith(t, local, framework.Options{})
}

// newFleetWith is newFleet with the manager's options opts, to which it
// adds the provider.
func newFleetWith(t *testing.T, local *fake.Server, opts framework.Options) *fleet {
	return newFleetOn(t, local.Config(), opts)
}

// newFleetOn is newFleetWith on the API server cfg points at.
func newFleetOn(t *testing.T, cfg *rest.Config, opts framework.Options) *fleet {
	f := &fleet{engager: make(chan cluster.Engager, 1)}
	opts.Clusters.Providers = append(opts.Clusters.Providers, cluster.ProviderFunc(func(ctx context.Context, e cluster.Engager) error {
		f.engager <- e
		<-ctx.Done()
		return nil
	}))
	f.mgr = testenv.NewManager(t, cfg, opts)
	return f
}

// start runs the manager until the test ends and engages cluster
// "edge-1" at cfg; it returns the provider's Engager.
func (f *fleet) start(t *testing.T, cfg *rest.Config) cluster.Engager {
	t.Helper()
	testenv.StartManager(t, f.mgr)
	e := <-f.engager
	if err := e.Engage(cluster.Target{Name: "edge-1", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	return e
}

// memberConfigMap returns ConfigMap ns/name holding data k=v.
func memberConfigMap(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": v}}
}

// seen records what each reconcile saw: its request, the cluster From
// returned, and the data of the object it was handed.
type seen struct {
	mu  sync.Mutex
	got []string
}

func (s *seen) add(v string) {
	s.mu.Lock()
	s.got = append(s.got, v)
	s.mu.Unlock()
}

func (s *seen) has(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.got, v)
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func TestControllerReconcilesEachClusterWithThatClustersClient(t *testing.T) {
	local := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "local")}})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "edge")}})
	f := newFleet(t, local)
	var remote, own seen
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "fleet", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			c := cluster.From(ctx)
			remote.add(fmt.Sprintf("%q %s", c.Name(), cm.Data["k"]))
			if cm.Annotations["seen-in"] != "" {
				return reconcile.Result{}, nil
			}
			cp := cm.DeepCopy()
			cp.Annotations = map[string]string{"seen-in": c.Name() + "/" + cm.Data["k"]}
			return reconcile.Result{}, c.Client().Update(ctx, cp)
		}))
	if err != nil {
		t.Fatal(err)
	}
	// A controller of the zero scope sees the manager's own cluster only.
	err = framework.NewBuilder[*corev1.ConfigMap](f.mgr, "own", framework.ControllerOptions{}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			own.add(fmt.Sprintf("%q %s", cluster.From(ctx).Name(), req))
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edge.Config())
	testenv.Eventually(t, "each cluster's object is reconciled with its own data", func() bool {
		return remote.has(`"" local`) && remote.has(`"edge-1" edge`)
	})
	for _, want := range []struct {
		srv  *fake.Server
		want string
	}{{local, "/local"}, {edge, "edge-1/edge"}} {
		testenv.Eventually(t, "the annotation written through the cluster's client", func() bool {
			var cm corev1.ConfigMap
			err := rawGet(t, want.srv.Config(), &cm)
			return err == nil && cm.Annotations["seen-in"] == want.want
		})
	}
	if got := f.mgr.Clusters().Names(); !slices.Equal(got, []string{"", "edge-1"}) {
		t.Errorf("Names() = %q, want the manager's own and edge-1", got)
	}
	for _, g := range remote.all() {
		if g != `"" local` && g != `"edge-1" edge` {
			t.Errorf("a reconcile saw %s: another cluster's object", g)
		}
	}
	for _, g := range own.all() {
		if g != `"" ns/cm` {
			t.Errorf("the controller of the manager's own cluster reconciled %s", g)
		}
	}
}

// rawGet reads ConfigMap ns/cm from the API server cfg points at.
func rawGet(t *testing.T, cfg *rest.Config, cm *corev1.ConfigMap) error {
	mgr := testenv.NewManager(t, cfg, framework.Options{})
	return mgr.APIReader().Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "cm"}, cm)
}

func TestDisengagingClusterDropsItsKeysAndFencesItsClient(t *testing.T) {
	local := fake.Start(t, fake.Options{})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "cm", "edge")}})
	logs := &logLines{}
	f := newFleetWith(t, local, framework.Options{Logger: funcr.New(logs.add, funcr.Options{})})
	entered := make(chan struct{})
	release := make(chan struct{})
	type outcome struct {
		ctxErr, writeErr error
	}
	out := make(chan outcome, 1)
	var calls seen
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "stuck", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(cluster.From(ctx).Name() + ":" + cm.Name)
			if cm.Name != "cm" || cluster.From(ctx).Name() != "edge-1" {
				return reconcile.Result{}, nil
			}
			close(entered)
			<-release // ignores its context
			cp := cm.DeepCopy()
			cp.Data["k"] = "written after disengagement"
			werr := cluster.From(ctx).Client().Update(context.WithoutCancel(ctx), cp) // ignores its context
			out <- outcome{ctx.Err(), werr}
			return reconcile.Result{}, werr
		}))
	if err != nil {
		t.Fatal(err)
	}
	e := f.start(t, edge.Config())
	<-entered
	e.Disengage("edge-1")
	if _, err := f.mgr.Clusters().Get("edge-1"); !errors.Is(err, cluster.ErrNotEngaged) {
		t.Errorf("Get(edge-1) after Disengage: %v, want ErrNotEngaged", err)
	}
	close(release)
	o := <-out
	if o.ctxErr == nil {
		t.Error("the reconcile's context was not cancelled when its cluster was disengaged")
	}
	if !errors.Is(o.writeErr, cluster.ErrDisengaged) {
		t.Errorf("write of a disengaged cluster's reconcile: %v, want ErrDisengaged", o.writeErr)
	}
	// Its failure is logged as a dropped key, not as one retried.
	testenv.Eventually(t, "the refused write's reconcile is logged", func() bool {
		return len(logs.matching("reconcile failed", `"cluster"="edge-1"`)) > 0
	})
	if n := len(logs.matching("the key is dropped, not retried", `"cluster"="edge-1"`, "disengaged")); n != 1 || len(logs.matching("retrying with backoff", `"cluster"="edge-1"`)) != 0 {
		t.Errorf("the refused write's log: %d lines saying the key is dropped, want 1; lines: %q", n, logs.matching("edge-1"))
	}
	var cm corev1.ConfigMap
	if err := rawGet(t, edge.Config(), &cm); err != nil || cm.Data["k"] != "edge" {
		t.Errorf("the disengaged cluster's object: %v, %v; want it unchanged", cm.Data, err)
	}
	// A change in the disengaged cluster reaches no reconcile.
	edgeMgr := testenv.NewManager(t, edge.Config(), framework.Options{})
	if err := edgeMgr.Client().Create(t.Context(), memberConfigMap("ns", "late", "x")); err != nil {
		t.Fatal(err)
	}
	localMgr := testenv.NewManager(t, local.Config(), framework.Options{})
	if err := localMgr.Client().Create(t.Context(), memberConfigMap("ns", "marker", "x")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the marker in the manager's own cluster is reconciled", func() bool { return calls.has(":marker") })
	if calls.has("edge-1:late") {
		t.Error("a change in the disengaged cluster was reconciled")
	}
}

// failingReadyz fails the /readyz probes of the transport it wraps while
// set; other requests (lists, watches) go through.
type failingReadyz struct {
	next http.RoundTripper
	fail *atomic.Bool
}

func (f failingReadyz) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.fail.Load() && r.URL.Path == "/readyz" {
		return nil, errors.New("probe blackholed")
	}
	return f.next.RoundTrip(r)
}

func TestUnhealthyClusterKeysWaitUntilItIsHealthyAgain(t *testing.T) {
	local := fake.Start(t, fake.Options{})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "first", "x")}})
	var fail atomic.Bool
	edgeCfg := edge.Config()
	edgeCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return failingReadyz{rt, &fail} }
	f := newFleetWith(t, local, framework.Options{
		Metrics:  framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		Clusters: cluster.Options{Health: cluster.HealthOptions{Interval: 10 * time.Millisecond, FailureThreshold: 2}},
	})
	var calls seen
	c, err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "health", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Build(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(cluster.From(ctx).Name() + ":" + cm.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edgeCfg)
	testenv.Eventually(t, "edge-1's object is reconciled", func() bool { return calls.has("edge-1:first") })

	fail.Store(true)
	state := func() cluster.State {
		cl, err := f.mgr.Clusters().Get("edge-1")
		if err != nil {
			return ""
		}
		return cl.Health().State
	}
	testenv.Eventually(t, "edge-1 turns unhealthy", func() bool { return state() == cluster.StateUnhealthy })
	edgeMgr := testenv.NewManager(t, edge.Config(), framework.Options{})
	if err := edgeMgr.Client().Create(t.Context(), memberConfigMap("ns", "second", "x")); err != nil {
		t.Fatal(err)
	}
	localMgr := testenv.NewManager(t, local.Config(), framework.Options{})
	if err := localMgr.Client().Create(t.Context(), memberConfigMap("ns", "marker", "x")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the marker is reconciled while edge-1's new key waits in the queue", func() bool {
		return calls.has(":marker") && c.QueueLen() == 1
	})
	if calls.has("edge-1:second") {
		t.Fatal("a key of an unhealthy cluster was reconciled")
	}
	// converge explain says the unhealthy cluster holds the key.
	_, body := testenv.MetricsGet(t, f.mgr, introspect.Path+"api/object?kind=ConfigMap&namespace=ns&name=second&cluster=edge-1")
	obj := decode[introspect.ObjectStatus](t, body)
	if len(obj.Controllers) != 1 {
		t.Fatalf("second in edge-1: %s", body)
	}
	lines, _ := obj.Controllers[0].Explain(time.Now())
	if !strings.HasPrefix(lines[0], "held: cluster edge-1 is unhealthy since ") || !strings.Contains(lines[0], "probe blackholed") {
		t.Errorf("explain of a key an unhealthy cluster holds: %q; want it to say so first, with the probe's error", lines)
	}
	fail.Store(false)
	testenv.Eventually(t, "edge-1's waiting key is reconciled once it is healthy", func() bool { return calls.has("edge-1:second") })
	if s := state(); s != cluster.StateReady {
		t.Errorf("edge-1 is %s, want ready", s)
	}
}

func TestToLocalMapsAnotherClustersEventToTheManagersOwnCluster(t *testing.T) {
	local := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "hub", "x")}})
	edge := fake.Start(t, fake.Options{})
	f := newFleet(t, local)
	var calls, mapped seen
	toHub := func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
		mapped.add(fmt.Sprintf("%q %s", cluster.From(ctx).Name(), s.Name))
		return []reconcile.Request{{Namespace: "ns", Name: "hub"}}
	}
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "hub", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		Watches(framework.ToLocal(framework.Map(toHub))).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.add(fmt.Sprintf("%q %s", cluster.From(ctx).Name(), cm.Name))
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edge.Config())
	testenv.Eventually(t, "the hub is reconciled", func() bool { return calls.has(`"" hub`) })
	testenv.Eventually(t, "edge-1 is watched", func() bool {
		return slices.Equal(f.mgr.Clusters().Names(), []string{"", "edge-1"})
	})
	before := len(calls.all())
	edgeMgr := testenv.NewManager(t, edge.Config(), framework.Options{})
	if err := edgeMgr.Client().Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "member-secret"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Map saw edge-1's Secret in edge-1", func() bool { return mapped.has(`"edge-1" member-secret`) })
	testenv.Eventually(t, "the hub is reconciled again in the manager's own cluster", func() bool {
		all := calls.all()
		return len(all) > before && slices.Contains(all[before:], `"" hub`)
	})
	for _, c := range calls.all() {
		if c != `"" hub` {
			t.Errorf("reconciled %s, want only the hub of the manager's own cluster", c)
		}
	}
}

// OnEngaged queues a key a newly engaged cluster holds no object of (the
// copy a controller pushes to each cluster), once; its primary kind's
// initial list queues the objects it holds.
func TestOnEngagedQueuesKeysOfANewlyEngagedCluster(t *testing.T) {
	local := fake.Start(t, fake.Options{})
	edge := fake.Start(t, fake.Options{Objects: []object.Object{memberConfigMap("ns", "held", "edge")}})
	f := newFleet(t, local)
	var calls, engaged seen
	err := framework.NewBuilder[*corev1.ConfigMap](f.mgr, "push", framework.ControllerOptions{Clusters: cluster.Scope{
		Remote: true,
		OnEngaged: func(ctx context.Context, c *cluster.Cluster) []reconcile.Request {
			engaged.add(c.Name() + "=" + cluster.From(ctx).Name())
			return []reconcile.Request{{Namespace: "ns", Name: "copy"}}
		},
	}}).CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		calls.add(req.String() + "@" + cluster.From(ctx).Name())
		return reconcile.Result{}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, edge.Config())
	testenv.Eventually(t, "edge-1's key of no object and its object are reconciled", func() bool {
		return calls.has("edge-1:ns/copy@edge-1") && calls.has("edge-1:ns/held@edge-1")
	})
	if got := engaged.all(); !slices.Equal(got, []string{"edge-1=edge-1"}) {
		t.Errorf("OnEngaged was called for %v, want once for edge-1, with edge-1 in its context", got)
	}
	err = framework.NewBuilder[*corev1.ConfigMap](f.mgr, "local-only", framework.ControllerOptions{Clusters: cluster.Scope{
		OnEngaged: func(context.Context, *cluster.Cluster) []reconcile.Request { return nil },
	}}).CompleteByKey(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err == nil || !strings.Contains(err.Error(), "OnEngaged is set without Clusters.Remote") {
		t.Errorf("OnEngaged without Remote: %v, want an error saying so", err)
	}
}
