package envtest_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

// shared is the Environment of the tests that do not disturb their control plane. It is
// started by the first test that asks for it and stopped by TestMain.
var shared struct {
	once sync.Once
	env  *envtest.Environment
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared environment: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// requireControlPlane skips t under -short, the one case where the control-plane binaries
// may be missing; otherwise a missing binary fails the test that starts an Environment.
func requireControlPlane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane; skipped with -short")
	}
}

// sharedEnv returns the shared Environment, starting it on first use.
func sharedEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	requireControlPlane(t)
	shared.once.Do(func() {
		env := envtest.New(envtest.Options{})
		start := time.Now()
		if _, err := env.Start(t.Context()); err != nil {
			shared.err = err
			return
		}
		t.Logf("shared environment ready in %v at %s", time.Since(start).Round(time.Millisecond), env.APIServerURL())
		shared.env = env
	})
	if shared.err != nil {
		t.Fatalf("start the shared environment: %v", shared.err)
	}
	return shared.env
}

// startEnv starts an Environment of t's own, stopped when t ends, and logs its start-up
// time.
func startEnv(t *testing.T, opts envtest.Options) (*envtest.Environment, *rest.Config) {
	t.Helper()
	requireControlPlane(t)
	env := envtest.New(opts)
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	start := time.Now()
	cfg, err := env.Start(t.Context())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("environment ready in %v at %s", time.Since(start).Round(time.Millisecond), env.APIServerURL())
	return env, cfg
}

// clientset returns a typed client for cfg.
func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// newNamespace creates a namespace for t alone.
func newNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// configMap returns a ConfigMap called name in ns holding data.
func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// eventually polls cond every 100ms until it returns nil, failing t with cond's last
// error after timeout. It is for what a real control plane does in the background (RBAC
// caches, garbage collection): there is nothing to wait on but the outcome.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, last)
	}
}
