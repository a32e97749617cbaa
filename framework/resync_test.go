package framework_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// resyncProbe counts one controller's reconciles and the replays its
// primary-kind predicate saw.
type resyncProbe struct {
	reconciles atomic.Int64
	// replays counts updates with equal resource versions; foreground
	// counts those not marked Replay (there must be none).
	replays, foreground atomic.Int64
}

func (p *resyncProbe) predicate(e framework.Change[object.Object]) bool {
	if e.Type == framework.Updated && e.Old.GetResourceVersion() == e.Object.GetResourceVersion() {
		p.replays.Add(1)
		if !e.Replay {
			p.foreground.Add(1)
		}
	}
	return true
}

func (p *resyncProbe) reconciler() reconcile.Reconciler {
	return reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		p.reconciles.Add(1)
		return reconcile.Result{}, nil
	})
}

// addProbe adds a controller for T with opts and returns its probe.
func addProbe[T object.Object](t *testing.T, mgr *framework.Manager, name string, opts framework.ControllerOptions) *resyncProbe {
	t.Helper()
	p := &resyncProbe{}
	err := framework.NewBuilder[T](mgr, name, opts).
		WithPredicates(func(e framework.Change[T]) bool {
			return p.predicate(framework.Change[object.Object]{Type: e.Type, Object: e.Object, Old: e.Old, Replay: e.Replay})
		}).
		CompleteByKey(p.reconciler())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResyncPerControllerAndPerKind runs four controllers on one manager
// whose cache resyncs Secrets every second and ConfigMaps never: a
// ConfigMap controller with its own ResyncPeriod, one without, a Secret
// controller taking the kind's period, and one opting out of it. The
// resyncing ones reconcile their object again and again without any change,
// through the background path; the others reconcile it once.
func TestResyncPerControllerAndPerKind(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "steady", nil)
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "steady"}, StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{
		Namespace:    ns,
		ResyncByKind: map[schema.GroupKind]time.Duration{{Kind: "Secret"}: time.Second},
	}})
	cmResync := addProbe[*corev1.ConfigMap](t, mgr, "cm-resync", framework.ControllerOptions{ResyncPeriod: time.Second})
	cmQuiet := addProbe[*corev1.ConfigMap](t, mgr, "cm-quiet", framework.ControllerOptions{})
	secretByKind := addProbe[*corev1.Secret](t, mgr, "secret-by-kind", framework.ControllerOptions{})
	secretOptOut := addProbe[*corev1.Secret](t, mgr, "secret-opt-out", framework.ControllerOptions{ResyncPeriod: -1})
	testenv.StartManager(t, mgr)

	// Each quiet controller reconciles its object once, from the initial list.
	testenv.Eventually(t, "every controller reconciled its object once", func() bool {
		return cmQuiet.reconciles.Load() >= 1 && secretOptOut.reconciles.Load() >= 1 &&
			cmResync.reconciles.Load() >= 1 && secretByKind.reconciles.Load() >= 1
	})
	quietCM, quietSecret := cmQuiet.reconciles.Load(), secretOptOut.reconciles.Load()

	// The resyncing ones go on without any change to their objects.
	base1, base2 := cmResync.reconciles.Load(), secretByKind.reconciles.Load()
	testenv.Eventually(t, "the resyncing controllers reconciled three more times", func() bool {
		return cmResync.reconciles.Load() >= base1+3 && secretByKind.reconciles.Load() >= base2+3
	})
	for name, p := range map[string]*resyncProbe{"cm-resync": cmResync, "secret-by-kind": secretByKind} {
		if p.replays.Load() < 3 {
			t.Errorf("%s: predicate saw %d replays, want at least 3", name, p.replays.Load())
		}
		if n := p.foreground.Load(); n != 0 {
			t.Errorf("%s: %d replays were not marked Replay", name, n)
		}
	}
	// Meanwhile (three resync periods) the others saw nothing.
	if got := cmQuiet.reconciles.Load(); got != quietCM {
		t.Errorf("cm-quiet (no ResyncPeriod, kind without resync) reconciled %d times, want %d", got, quietCM)
	}
	if got := secretOptOut.reconciles.Load(); got != quietSecret {
		t.Errorf("secret-opt-out (ResyncPeriod -1) reconciled %d times, want %d", got, quietSecret)
	}
	for name, p := range map[string]*resyncProbe{"cm-quiet": cmQuiet, "secret-opt-out": secretOptOut} {
		if n := p.replays.Load(); n != 0 {
			t.Errorf("%s: predicate saw %d replays, want none", name, n)
		}
	}
}
