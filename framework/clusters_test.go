package framework_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
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
	f := &fleet{engager: make(chan cluster.Engager, 1)}
	f.mgr = testenv.NewManager(t, local.Config(), framework.Options{Clusters: cluster.Options{
		Providers: []cluster.Provider{cluster.ProviderFunc(func(ctx context.Context, e cluster.Engager) error {
			f.engager <- e
			<-ctx.Done()
			return nil
		})},
	}})
	return f
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
	testenv.StartManager(t, f.mgr)
	e := <-f.engager
	if err := e.Engage(cluster.Target{Name: "edge-1", Config: edge.Config()}); err != nil {
		t.Fatal(err)
	}
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
	f := newFleet(t, local)
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
	testenv.StartManager(t, f.mgr)
	e := <-f.engager
	if err := e.Engage(cluster.Target{Name: "edge-1", Config: edge.Config()}); err != nil {
		t.Fatal(err)
	}
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
