package informers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// replays counts the resync replays (updates with equal resource versions)
// a handler receives.
func replays[T object.Object](t *testing.T, inf *informers.Informer[T], opts cache.HandlerOptions) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	reg, err := inf.AddListener(informers.ListenerFuncs[T]{UpdateFunc: func(o, n2 T) {
		if o.GetResourceVersion() == n2.GetResourceVersion() {
			n.Add(1)
		}
	}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inf.RemoveListener(reg) })
	return &n
}

// TestResyncPerKindAndPerHandler adds handlers to informers that already
// run (client-go alone then ignores a handler's shorter period): the kind's
// period from ResyncByKind applies to handlers asking for none, a handler's
// own period wins over it and over a kind without resync.
func TestResyncPerKindAndPerHandler(t *testing.T) { inBothForms(t, testResyncPerKindAndPerHandler) }

func testResyncPerKindAndPerHandler(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "steady", nil)
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "steady"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := started(t, cfg, informers.Options{
		Namespace:    ns,
		ResyncByKind: map[schema.GroupKind]time.Duration{{Kind: "ConfigMap"}: time.Second},
	})
	cms, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informers.For[*corev1.Secret](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	for _, inf := range []interface {
		WaitForSync(ctx context.Context) error
	}{cms, secrets} {
		if err := inf.WaitForSync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	none := time.Duration(0)
	second := time.Second
	kindDefault := replays(t, cms, cache.HandlerOptions{})
	optedOut := replays(t, cms, cache.HandlerOptions{ResyncPeriod: &none})
	own := replays(t, secrets, cache.HandlerOptions{ResyncPeriod: &second})
	secretDefault := replays(t, secrets, cache.HandlerOptions{})

	eventually(t, "three replays to the ConfigMap handler and the Secret handler with its own period", func() bool {
		return kindDefault.Load() >= 3 && own.Load() >= 3
	})
	if n := optedOut.Load(); n != 0 {
		t.Errorf("ConfigMap handler with ResyncPeriod 0 got %d replays", n)
	}
	if n := secretDefault.Load(); n != 0 {
		t.Errorf("Secret handler of a kind without resync got %d replays", n)
	}
}

func TestResyncValidation(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	_, err := informers.New(cfg, informers.Options{Mapper: nil, ResyncByKind: map[schema.GroupKind]time.Duration{{Kind: "Pod"}: time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "Options.ResyncByKind[Pod] must be at least 1s") {
		t.Errorf("ResyncByKind of 1ms: got %v", err)
	}
	c, err := informers.New(cfg, informers.Options{}) // no request until an informer starts
	if err != nil {
		t.Fatal(err)
	}
	pods, err := informers.For[*corev1.Pod](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Millisecond, -time.Second} {
		_, err := pods.AddListener(informers.ListenerFuncs[*corev1.Pod]{}, cache.HandlerOptions{ResyncPeriod: &d})
		if err == nil || !strings.Contains(err.Error(), "add listener to v1 Pod") || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("handler resync period %v: got %v", d, err)
		}
	}
}
