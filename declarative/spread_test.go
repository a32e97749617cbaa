package declarative_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/namespaces"
	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// A manager that spreads its clusters over its ring refuses a child in
// another cluster, even one it holds now (a single member holds them
// all, and would have applied it): the parent's Ready condition names the
// parent, the child and the cluster, nothing is applied there, and the
// parent's deletion is not held.
func TestChildInAnotherClusterIsRefusedWhenClustersAreSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	plane := envtest.New(envtest.Options{CRDs: envtest.CRDOptions{Paths: []string{"../examples/staticsite/config/crd"}}})
	t.Cleanup(func() { _ = plane.Stop() })
	cfg, err := plane.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	for ns, l := range map[string]map[string]string{"ns": nil, "leases": nil, "edge": {"spread": "edge"}} {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mgr := testenv.NewManager(t, cfg, framework.Options{
		Scheme: s,
		Sharding: sharding.Options{Ring: "r", Clusters: true, FormationDelay: -1,
			Lease: lease.Options{Namespace: "leases", Identity: "m0", Duration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}},
		Clusters: cluster.Options{Providers: []cluster.Provider{namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{"spread": "edge"})})}},
	})
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "child"}, Data: map[string]string{"k": "v"}}
		return declarative.State{
			Children: []any{declarative.NewChild(child).InCluster("edge")},
			Status:   v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation, Conditions: site.Status.Conditions},
		}, nil
	}
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](desired), declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.NewBuilder[*v1alpha1.StaticSite](mgr, "site", framework.ControllerOptions{}).Complete(d); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "this member holds cluster edge", func() bool {
		c, err := mgr.Clusters().Get("edge")
		return err == nil && c.Health().State == cluster.StateReady
	})

	site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site"}, Spec: v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "hi"}}}
	if err := mgr.Client().Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	read := func() *v1alpha1.StaticSite {
		got := &v1alpha1.StaticSite{}
		err := mgr.APIReader().Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "site"}, got)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := []string{"StaticSite ns/site", "child ConfigMap edge/child in cluster edge", "Options.Sharding.Clusters"}
	testenv.Eventually(t, "the parent's Ready condition refuses the child, naming parent, child and cluster", func() bool {
		for _, c := range read().Status.Conditions {
			if c.Type == declarative.ReadyCondition && c.Reason == declarative.ChildGraphReason {
				return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(c.Message, w) })
			}
		}
		return false
	})
	if _, err := cs.CoreV1().ConfigMaps("edge").Get(t.Context(), "child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused child was applied in cluster edge (get: %v)", err)
	}
	if f := read().Finalizers; len(f) > 0 {
		t.Errorf("the parent of a refused child has finalizers %v", f)
	}
	if err := mgr.Client().Delete(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the parent's deletion is not held", func() bool { return read() == nil })
}
