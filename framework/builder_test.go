package framework_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// unregistered is an API type no scheme knows.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object { cp := *u; return &cp }

// withReplicas is an interface narrower than object.Object.
type withReplicas interface {
	object.Object
	GetReplicas() int32
}

// offlineManager returns a manager whose API server is never contacted:
// building controllers needs no cluster.
func offlineManager(t *testing.T) *framework.Manager {
	t.Helper()
	mgr, err := framework.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

var noop = reconcile.ObjectFunc[*corev1.Pod](func(context.Context, *corev1.Pod) (reconcile.Result, error) {
	return reconcile.Result{}, nil
})

func TestBuilderValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(mgr *framework.Manager) error
		want  []string // substrings of the error; nil means success
	}{
		{"valid", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Owns(&corev1.ConfigMap{}).Complete(noop)
		}, nil},
		{"nil reconciler", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Complete(nil)
		}, []string{`controller "pods"`, "*v1.Pod", "reconciler is nil"}},
		{"nil func reconciler", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).CompleteByKey(reconcile.Func(nil))
		}, []string{"reconciler is nil"}},
		{"empty name", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "", framework.ControllerOptions{}).Complete(noop)
		}, []string{"controller name is empty"}},
		{"negative workers", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{Workers: -1}).Complete(noop)
		}, []string{"Workers must not be negative, got -1"}},
		{"resync shorter than client-go allows", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{ResyncPeriod: time.Millisecond}).Complete(noop)
		}, []string{"ControllerOptions.ResyncPeriod must be at least 1s (or negative for none), got 1ms"}},
		{"duplicate name", func(mgr *framework.Manager) error {
			if err := framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Complete(noop); err != nil {
				return err
			}
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Complete(noop)
		}, []string{`controller named "pods" already exists`}},
		{"primary type not in scheme", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*unregistered](mgr, "u", framework.ControllerOptions{}).
				Complete(reconcile.ObjectFunc[*unregistered](func(context.Context, *unregistered) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}))
		}, []string{`controller "u"`, "*framework_test.unregistered is not registered in the scheme"}},
		{"owned type not in scheme", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Owns(&unregistered{}).Complete(noop)
		}, []string{"watch *framework_test.unregistered", "not registered in the scheme"}},
		{"unstructured without a kind", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*unstructured.Unstructured](mgr, "u", framework.ControllerOptions{}).
				Complete(reconcile.ObjectFunc[*unstructured.Unstructured](func(context.Context, *unstructured.Unstructured) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}))
		}, []string{"needs Selection.Kind"}},
		{"nil owned object", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Owns(nil).Complete(noop)
		}, []string{"Owns called with a nil object"}},
		{"typed nil owned object", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Owns((*corev1.ConfigMap)(nil)).Complete(noop)
		}, []string{`controller "pods"`, "Owns called with a nil *v1.ConfigMap", "&v1.ConfigMap{}"}},
		{"typed nil in Owned", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.Owned((*corev1.ConfigMap)(nil))).Complete(noop)
		}, []string{"Owned called with a nil *v1.ConfigMap"}},
		{"typed nil in Owned of an interface type", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.Owned[object.Object]((*corev1.ConfigMap)(nil))).Complete(noop)
		}, []string{"Owned called with a nil *v1.ConfigMap"}},
		{"Map of the interface type object.Object, the kind given", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.WithSelection(framework.Map(func(context.Context, object.Object) []reconcile.Request { return nil }),
					informers.Selection{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})).Complete(noop)
		}, nil},
		{"Map of an interface type the kind's objects do not implement", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.WithSelection(framework.Map(func(context.Context, withReplicas) []reconcile.Request { return nil }),
					informers.Selection{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})).Complete(noop)
		}, []string{"watch framework_test.withReplicas", "a *v1.ConfigMap is not a framework_test.withReplicas"}},
		{"metadata-only owned kind", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).OwnsMetadata(&corev1.Secret{}).Complete(noop)
		}, nil},
		{"nil metadata-only owned object", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).OwnsMetadata((*corev1.Secret)(nil)).Complete(noop)
		}, []string{"OwnsMetadata called with a nil *v1.Secret", "&v1.Secret{}"}},
		{"metadata-only owned type not in scheme", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).OwnsMetadata(&unregistered{}).Complete(noop)
		}, []string{"OwnsMetadata *framework_test.unregistered", "not registered"}},
		{"metadata-only owned object without a kind", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).OwnsMetadata(&metav1.PartialObjectMetadata{}).Complete(noop)
		}, []string{"OwnsMetadata *v1.PartialObjectMetadata", "apiVersion and kind must be set"}},
		{"nil map function", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.Map[*corev1.ConfigMap](nil)).Complete(noop)
		}, []string{"Map called with a nil function"}},
		{"nil predicate", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				WithPredicates(nil).Complete(noop)
		}, []string{"WithPredicates", "predicate 0 is nil"}},
		{"nil predicate of a source", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).
				Watches(framework.Owned(&corev1.ConfigMap{}, nil)).Complete(noop)
		}, []string{"predicate 0 is nil"}},
		{"nil source", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Watches(nil).Complete(noop)
		}, []string{"Watches called with a nil Source"}},
		{"every problem reported at once", func(mgr *framework.Manager) error {
			return framework.NewBuilder[*corev1.Pod](mgr, "", framework.ControllerOptions{Workers: -2}).Complete(nil)
		}, []string{"controller name is empty", "Workers must not be negative", "reconciler is nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build(offlineManager(t))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestManagerStartTwice(t *testing.T) {
	mgr := offlineManager(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("first Start with a cancelled context: %v", err)
	}
	if err := mgr.Start(t.Context()); err != framework.ErrManagerStarted {
		t.Fatalf("second Start = %v, want ErrManagerStarted", err)
	}
}
