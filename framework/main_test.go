package framework_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/testenv"
)

// plane is the control plane shared by this package's integration tests,
// started on first use.
var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// run is a manager whose Start runs in a goroutine.
type run struct {
	cancel context.CancelFunc
	done   chan struct{}
	// err is what Start returned, and returned when; read them after done.
	err      error
	returned time.Time
}

// startManager runs mgr.Start until the test ends (or run.cancel).
func startManager(t *testing.T, mgr *framework.Manager) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &run{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = mgr.Start(ctx)
		r.returned = time.Now()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(40 * time.Second):
			t.Error("Manager.Start did not return 40 s after its context was cancelled")
		}
	})
	return r
}

func createConfigMap(t *testing.T, cs kubernetes.Interface, ns, name string, labels map[string]string) *corev1.ConfigMap {
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

// newManager returns a manager on cfg that logs nothing.
func newManager(t *testing.T, cfg *rest.Config, opts framework.Options) *framework.Manager {
	t.Helper()
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}
