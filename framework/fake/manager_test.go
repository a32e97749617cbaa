package fake_test

import (
	"context"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
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
// the test ends.
func startManager(t *testing.T, srv *fake.Server, s *runtime.Scheme) *framework.Manager {
	t.Helper()
	mgr, err := framework.NewManager(srv.Config(), framework.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	err = framework.NewController[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).
		Complete(declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](site.Desired), declarative.Options{Children: site.Children()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager.Start: %v", err)
		}
	})
	return mgr
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
	mgr := startManager(t, srv, s)
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
