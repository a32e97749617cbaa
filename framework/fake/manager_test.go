package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
)

func staticSiteScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startManager runs a manager on srv with the StaticSite controller until
// the test ends or stop is called (opts.Logger defaults to one that
// discards, see testenv.NewManager). Start must return no error.
func startManager(t *testing.T, srv *fake.Server, opts framework.Options) (mgr *framework.Manager, stop func()) {
	t.Helper()
	mgr = testenv.NewManager(t, srv.Config(), opts)
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](site.Desired), declarative.Options{ChildKinds: site.Children()})
	if err != nil {
		t.Fatal(err)
	}
	err = framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)
	if err != nil {
		t.Fatal(err)
	}
	run := testenv.StartManager(t, mgr)
	stop = func() {
		run.Cancel()
		<-run.Done
	}
	t.Cleanup(func() {
		stop()
		if run.Err != nil {
			t.Errorf("Manager.Start: %v", run.Err)
		}
	})
	return mgr, stop
}

// eventually polls cond until it holds or the test's deadline (30 s at
// most) passes.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: never happened (last error: %v)", what, last)
	}
}

func TestDeclarativeControllerRunsOnTheFake(t *testing.T) {
	s := staticSiteScheme(t)
	parent := &v1alpha1.StaticSite{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "docs"},
		Spec:       v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "hello"}},
	}
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{parent}})
	mgr, _ := startManager(t, srv, framework.Options{Scheme: s})
	c := mgr.APIReader()

	key := types.NamespacedName{Namespace: "web", Name: "docs"}
	eventually(t, "the ConfigMap is applied", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return false, err
		}
		return cm.Data["index.html"] == "hello", nil
	})
	eventually(t, "the StaticSite is Ready", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.StaticSite{}
		if err := c.Get(ctx, key, got); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, "Ready") && got.Status.ObservedGeneration == got.Generation, nil
	})

	// A child declared, then no longer declared, is pruned.
	setMinAvailable := func(patch string) {
		t.Helper()
		if err := mgr.Client().Patch(t.Context(), &v1alpha1.StaticSite{ObjectMeta: parent.ObjectMeta}, types.MergePatchType, []byte(patch)); err != nil {
			t.Fatal(err)
		}
	}
	setMinAvailable(`{"spec":{"minAvailable":1}}`)
	eventually(t, "the PodDisruptionBudget is applied", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &policyv1.PodDisruptionBudget{})
		return err == nil, err
	})
	setMinAvailable(`{"spec":{"minAvailable":null}}`)
	eventually(t, "the PodDisruptionBudget is pruned", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &policyv1.PodDisruptionBudget{})
		return apierrors.IsNotFound(err), err
	})

	// Deleting the parent collects its children.
	got := &v1alpha1.StaticSite{}
	if err := c.Get(t.Context(), key, got); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client().Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment is collected", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), nil
	})
}

// Two managers elect one leader through a Lease on the fake; when the
// leader stops, it releases the Lease and the other takes over.
func TestLeaderElectionOnTheFake(t *testing.T) {
	s := staticSiteScheme(t)
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{
		&v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "docs"}},
	}})
	leaderElection := func(identity string) framework.Options {
		return framework.Options{Scheme: s, LeaderElection: framework.LeaderElectionOptions{
			Enabled: true,
			ID:      "staticsite",
			Lease:   lease.Options{Namespace: "kube-system", Identity: identity, RetryPeriod: 100 * time.Millisecond},
		}}
	}
	holds := func(identity string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			lease, err := kubernetes.NewForConfigOrDie(srv.Config()).CoordinationV1().Leases("kube-system").Get(ctx, "staticsite", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return ptr.Deref(lease.Spec.HolderIdentity, "") == identity, nil
		}
	}
	configMapExists := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := kubernetes.NewForConfigOrDie(srv.Config()).CoreV1().ConfigMaps("web").Get(ctx, name, metav1.GetOptions{})
			return err == nil, err
		}
	}

	first, stopFirst := startManager(t, srv, leaderElection("first"))
	eventually(t, "the first manager leads", holds("first"))
	eventually(t, "the first manager applies the ConfigMap", configMapExists("docs"))
	_, _ = startManager(t, srv, leaderElection("second"))
	stopFirst()
	eventually(t, "the second manager leads once the first stopped", holds("second"))
	blog := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "blog"}}
	if err := first.Client().Create(t.Context(), blog); !errors.Is(err, framework.ErrManagerStopped) {
		t.Errorf("a write through the stopped leader's client: got %v, want ErrManagerStopped", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(srv.Config()).CoreV1().ConfigMaps("web").Get(t.Context(), "blog", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("before the StaticSite exists: %v", err)
	}
	dc := dynamic.NewForConfigOrDie(srv.Config())
	u := unstructuredSite("blog")
	u.SetNamespace("web")
	if _, err := dc.Resource(staticSites).Namespace("web").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second manager applies the new StaticSite's ConfigMap", configMapExists("blog"))
}
