package framework_test

import (
	"context"
	"errors"
	"flag"
	"io"
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
	if err := framework.NewController[*corev1.Pod](mgr, "pods", framework.ControllerOptions{}).Complete(noop); err != nil {
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
