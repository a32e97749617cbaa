package framework_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
)

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// TestProbesBeforeSync serves probes while the manager cannot reach its API
// server: liveness passes, readiness fails naming why.
func TestProbesBeforeSync(t *testing.T) {
	mgr, err := framework.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, framework.Options{HealthProbeBindAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.NewBuilder[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Complete(noop); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddReadyCheck("custom", func(*http.Request) error { return errors.New("not yet") }); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddReadyCheck("custom", func(*http.Request) error { return nil }); err == nil {
		t.Error("a second ready check named custom was accepted")
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})

	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		addr = mgr.HealthProbeAddress()
	}
	if addr == "" {
		t.Fatal("probe server did not start")
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d, want 503 before the caches synced", code)
	}
	for _, want := range []string{"[-]caches failed: cache for v1 Pod not ready", "[-]custom failed: not yet"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body %q lacks %q", body, want)
		}
	}
}

// TestStartOnATakenPortNamesTheFlag: a port another process holds fails
// Start at once with an error naming the address and the flag to change.
func TestStartOnATakenPortNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(addr string) framework.Options
		flag string
	}{
		{"probes", func(addr string) framework.Options { return framework.Options{HealthProbeBindAddress: addr} }, "--health-probe-bind-address"},
		{"metrics", func(addr string) framework.Options {
			return framework.Options{Metrics: framework.MetricsOptions{BindAddress: addr, Insecure: true}}
		}, "--metrics-bind-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			mgr, err := framework.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, tc.opts(l.Addr().String()))
			if err != nil {
				t.Fatal(err)
			}
			err = mgr.Start(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), l.Addr().String()) {
				t.Errorf("Start with %s on a taken port: %v, want an error naming %s and the address", tc.name, err, tc.flag)
			}
		})
	}
}

// TestFlagsConfigWithoutKubeconfig: with no kubeconfig anywhere the error
// names the two ways to give one.
func TestFlagsConfigWithoutKubeconfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var f framework.Flags
	f.Register(newFlagSet())
	_, err := f.Config()
	if !errors.Is(err, framework.ErrNoConfig) || !strings.Contains(err.Error(), "--kubeconfig") || !strings.Contains(err.Error(), "$KUBECONFIG") {
		t.Errorf("Config without a kubeconfig: %v, want ErrNoConfig naming --kubeconfig and $KUBECONFIG", err)
	}
}
