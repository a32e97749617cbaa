package envtest_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestAPIServerComesBackWithItsObjects(t *testing.T) {
	t.Parallel()
	env, cfg := startEnv(t, envtest.Options{
		CRDs: envtest.CRDOptions{Paths: []string{"testdata/crds"}}, // installed by Start
	})
	ctx := t.Context()
	// Clients made before the restarts must keep working after them.
	cs := clientset(t, cfg)
	dyn := dynamicClient(t, cfg)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "survivor", map[string]string{"k": "v"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	w, err := dyn.Resource(widgets).Namespace("default").Create(ctx, widget("default", "survivor", 7), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Widget: %v", err)
	}
	url := env.APIServerURL()

	readBack := func(t *testing.T) {
		t.Helper()
		got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
		if err != nil || got.UID != cm.UID || got.Data["k"] != "v" {
			t.Errorf("ConfigMap after restart: %v, %v; want uid %s with k=v", got, err, cm.UID)
		}
		gotW, err := dyn.Resource(widgets).Namespace("default").Get(ctx, "survivor", metav1.GetOptions{})
		if err != nil || gotW.GetUID() != w.GetUID() {
			t.Errorf("Widget after restart: %v, %v; want uid %s", gotW, err, w.GetUID())
		}
		if env.APIServerURL() != url {
			t.Errorf("APIServerURL after restart = %s, want %s", env.APIServerURL(), url)
		}
	}

	t.Run("restart", func(t *testing.T) {
		start := time.Now()
		if err := env.RestartAPIServer(ctx); err != nil {
			t.Fatalf("RestartAPIServer: %v", err)
		}
		t.Logf("kube-apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
		readBack(t)
	})

	t.Run("kill and start", func(t *testing.T) {
		if err := env.KillAPIServer(); err != nil {
			t.Fatalf("KillAPIServer: %v", err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{}); err == nil {
			t.Fatal("a request succeeded while kube-apiserver was killed")
		}
		if err := env.KillAPIServer(); err != nil {
			t.Errorf("KillAPIServer when not running = %v, want nil", err)
		}
		start := time.Now()
		if err := env.StartAPIServer(ctx); err != nil {
			t.Fatalf("StartAPIServer: %v", err)
		}
		t.Logf("kube-apiserver started again in %v", time.Since(start).Round(time.Millisecond))
		if err := env.StartAPIServer(ctx); err != nil {
			t.Errorf("StartAPIServer when running = %v, want nil", err)
		}
		readBack(t)
	})

	t.Run("stop and start", func(t *testing.T) {
		if err := env.StopAPIServer(ctx); err != nil {
			t.Fatalf("StopAPIServer: %v", err)
		}
		if err := env.StartAPIServer(ctx); err != nil {
			t.Fatalf("StartAPIServer: %v", err)
		}
		readBack(t)
	})

	if err := env.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := env.RestartAPIServer(ctx); !errors.Is(err, envtest.ErrStopped) {
		t.Errorf("RestartAPIServer after Stop = %v, want ErrStopped", err)
	}
}
