package namespaces_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/namespaces"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

func TestEachSelectedNamespaceIsACluster(t *testing.T) {
	ns := func(name string, member bool) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if member {
			n.Labels = map[string]string{"member": "true"}
		}
		return n
	}
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
	}
	srv := fake.Start(t, fake.Options{Objects: []object.Object{ns("a", true), ns("b", true), ns("c", false), cm("a"), cm("b"), cm("c")}})
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Clusters: cluster.Options{
		Providers: []cluster.Provider{namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{"member": "true"})})},
	}})
	var mu sync.Mutex
	var got []string
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "members", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Cluster == "" {
				return reconcile.Result{}, nil // the manager's own cluster sees every namespace
			}
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.String())
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	has := func(k string) bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(got, k) }
	testenv.Eventually(t, "each member namespace's ConfigMap is reconciled in its cluster", func() bool { return has("a:a/cm") && has("b:b/cm") })
	mu.Lock()
	for _, k := range got {
		if k != "a:a/cm" && k != "b:b/cm" {
			t.Errorf("reconciled %s: outside the member namespaces' own", k)
		}
	}
	mu.Unlock()
	if err := mgr.Client().Delete(t.Context(), ns("b", true)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted namespace's cluster is disengaged", func() bool {
		return slices.Equal(mgr.Clusters().Names(), []string{"", "a"})
	})
}
