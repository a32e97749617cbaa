package testenv

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/go-logr/logr"
)

// NewManager returns a manager on cfg. opts.Logger defaults to one that
// discards every line without touching klog (logr.Discard() is the zero
// Logger, which the manager reads as unset and replaces with its default).
func NewManager(t *testing.T, cfg *rest.Config, opts framework.Options) *framework.Manager {
	t.Helper()
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.FromSlogHandler(slog.DiscardHandler)
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// Run is a manager whose Start runs in a goroutine (see StartManager).
type Run struct {
	// Cancel cancels Start's context.
	Cancel context.CancelFunc
	// Done is closed when Start has returned.
	Done chan struct{}
	// Err is what Start returned, and Returned when; read them after Done.
	Err      error
	Returned time.Time
}

// StartManager runs mgr.Start until the test ends (or Run.Cancel); the
// test's cleanup fails it if Start has not returned 40 s after its context
// was cancelled.
func StartManager(t *testing.T, mgr *framework.Manager) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &Run{Cancel: cancel, Done: make(chan struct{})}
	go func() {
		defer close(r.Done)
		r.Err = mgr.Start(ctx)
		r.Returned = time.Now()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.Done:
		case <-time.After(40 * time.Second):
			t.Error("Manager.Start did not return 40 s after its context was cancelled")
		}
	})
	return r
}

// CreateConfigMap creates ConfigMap ns/name with labels and data k=name.
func CreateConfigMap(t *testing.T, cs kubernetes.Interface, ns, name string, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       map[string]string{"k": name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// Eventually polls cond every 50 ms for up to 60 s (generous: the machine
// may be busy) and fails t naming what it waited for. Calls of cond do not
// overlap.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
