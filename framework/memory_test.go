package framework_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/reconcile"
)

// series returns the value of the one series of name whose labels include
// every label in want, from a /metrics body; false when there is none.
func series(body, name string, want ...string) (float64, bool) {
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, name))
		i := strings.LastIndexByte(line, ' ')
		labels, value := line[:i+1], line[i+1:]
		match := true
		for _, w := range want {
			match = match && strings.Contains(labels, w)
		}
		if match {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// startWatchingConfigMaps runs mgr with a controller of ConfigMaps that
// does nothing.
func startWatchingConfigMaps(t *testing.T, mgr *framework.Manager) {
	t.Helper()
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "configmaps", framework.ControllerOptions{}).
		CompleteByKey(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
}

// A manager on a real control plane exports each informer's objects and
// estimated bytes, the per-kind totals, the shared values' bytes, and a
// count of the informers reads started; its debug JSON shows the same.
func TestMetricsShowTheCacheMemory(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	const n = 40
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"payload": strings.Repeat("x", 2048)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr := testenv.NewManager(t, cfg, framework.Options{Cache: informers.Options{Namespace: ns},
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}})
	startWatchingConfigMaps(t, mgr)
	testenv.Eventually(t, "metrics served", func() bool { return mgr.MetricsAddress() != "" })

	// A read of Secrets, which nothing watches: it starts an informer.
	var s corev1.Secret
	if err := mgr.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "s"}, &s); err != nil {
		t.Fatal(err)
	}

	cmLabels := []string{`group=""`, `version="v1"`, `kind="ConfigMap"`}
	informer := `informer="v1 ConfigMap in namespace ` + ns + `"`
	var body string
	testenv.Eventually(t, "the ConfigMaps' informer counted in /metrics", func() bool {
		_, body = testenv.MetricsGet(t, mgr, "/metrics")
		v, ok := series(body, "converge_cache_informer_objects", append(cmLabels, informer)...)
		return ok && v == n
	})
	bytes, ok := series(body, "converge_cache_informer_bytes", append(cmLabels, informer)...)
	if !ok || bytes < n*2048 || bytes > n*8192 {
		t.Errorf("converge_cache_informer_bytes of %d ConfigMaps of 2 KiB = %v (%v), want 2 to 8 KiB each", n, bytes, ok)
	}
	if total, ok := series(body, "converge_cache_bytes", cmLabels...); !ok || total != bytes {
		t.Errorf("converge_cache_bytes of ConfigMaps = %v (%v), want the one informer's %v", total, ok, bytes)
	}
	if _, ok := series(body, "converge_cache_shared_bytes"); !ok {
		t.Error("no converge_cache_shared_bytes")
	}
	if v, ok := series(body, "converge_cache_informers_started_by_reads_total", `kind="Secret"`, `mode="typed"`); !ok || v != 1 {
		t.Errorf("converge_cache_informers_started_by_reads_total of Secrets = %v (%v), want 1", v, ok)
	}
	if _, ok := series(body, "converge_cache_informers_started_by_reads_total", `kind="ConfigMap"`); ok {
		t.Error("the controller's own informer of ConfigMaps is counted as started by a read")
	}

	code, state := testenv.MetricsGet(t, mgr, introspect.Path+"api/state")
	if code != http.StatusOK {
		t.Fatalf("api/state: %d %s", code, state)
	}
	st := decode[introspect.State](t, state)
	if st.Memory.LiveHeapBytes <= 0 || st.Memory.CacheBytes < int64(bytes) || len(st.Memory.Kinds) != 2 {
		t.Errorf("api/state memory %+v, want the live heap, the cache's estimate and two kinds", st.Memory)
	}
	for _, k := range st.Memory.Kinds {
		if (k.Kind.Kind == "Secret") != (k.StartedByRead == 1) {
			t.Errorf("kind %+v: want only the Secrets flagged as started by a read", k)
		}
	}
}

// With Options.Cache.RefuseUnwatchedReads, the manager's client refuses a
// read of a kind nothing watches, naming it, and starts no informer;
// reads of the controller's kind work.
func TestManagerRefusesUnwatchedReads(t *testing.T) {
	cfg := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)
	mgr := testenv.NewManager(t, cfg, framework.Options{Cache: informers.Options{Namespace: ns, RefuseUnwatchedReads: true}})
	startWatchingConfigMaps(t, mgr)
	var cm corev1.ConfigMap
	if err := mgr.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}, &cm); err != nil {
		t.Errorf("Get of the watched kind: %v", err)
	}
	err := mgr.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "s"}, &corev1.Secret{})
	if !errors.Is(err, informers.ErrNotWatched) || !strings.Contains(err.Error(), "v1 Secret as typed objects") {
		t.Errorf("Get of Secrets, which nothing watches = %v, want ErrNotWatched naming v1 Secret", err)
	}
	for _, st := range mgr.Cache().Stats() {
		if st.Kind.Kind == "Secret" {
			t.Errorf("a refused read started %s", st.Description)
		}
	}
	// The API reader reads around the cache.
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.APIReader().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "s"}, &corev1.Secret{}); err != nil {
		t.Errorf("APIReader Get of Secrets: %v", err)
	}
}
