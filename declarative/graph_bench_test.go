package declarative_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

// BenchmarkSteadyState measures a reconcile of a parent whose 20 children
// are all applied, unchanged and ready: as bare objects, and as a chain of
// NewChild, each After the one before (readiness read and the Ready
// condition built, and found unchanged).
func BenchmarkSteadyState(b *testing.B) {
	for _, graph := range []bool{false, true} {
		b.Run(fmt.Sprintf("graph=%v", graph), func(b *testing.B) {
			children := func() []any {
				out := make([]any, 0, 20)
				var prev *corev1.ConfigMap
				for i := range 20 {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d", i)}, Data: map[string]string{"k": "v"}}
					switch {
					case !graph:
						out = append(out, cm)
					case prev == nil:
						out = append(out, declarative.NewChild(cm))
					default:
						out = append(out, declarative.NewChild(cm).After(prev))
					}
					prev = cm
				}
				return out
			}
			benchmarkReconcile(b, children)
		})
	}
}

func benchmarkReconcile(b *testing.B, children func() []any) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site", Generation: 1}}
	srv := fake.Start(b, fake.Options{Scheme: s, Objects: []object.Object{site}})
	mgr, err := framework.NewManager(srv.Config(), framework.Options{Scheme: s, Logger: logr.FromSlogHandler(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		return declarative.State{Children: children(), Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
	}), declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	key := types.NamespacedName{Namespace: "ns", Name: "site"}
	parent := &v1alpha1.StaticSite{}
	// Until a reconcile writes nothing: every child applied, the status held.
	for range 5 {
		if err := mgr.APIReader().Get(ctx, key, parent); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Reconcile(ctx, parent); err != nil {
			b.Fatal(err)
		}
	}
	if err := mgr.Client().Get(ctx, key, parent); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := d.Reconcile(ctx, parent); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := &v1alpha1.StaticSite{}
	if err := mgr.APIReader().Get(ctx, key, after); err != nil {
		b.Fatal(err)
	}
	if after.ResourceVersion != parent.ResourceVersion {
		b.Fatalf("the steady state wrote the parent (resourceVersion %s, then %s)", parent.ResourceVersion, after.ResourceVersion)
	}
}
