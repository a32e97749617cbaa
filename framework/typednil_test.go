package framework_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
)

type nilRunnable struct{}

func (*nilRunnable) Start(context.Context) error { return nil }

// Manager.Add refuses a nil Runnable, typed or not, naming the argument: a
// typed nil would otherwise panic in the manager's goroutine at Start.
func TestAddRefusesNilRunnables(t *testing.T) {
	mgr := testenv.NewManager(t, fake.Start(t, fake.Options{}).Config(), framework.Options{})
	var ptr *nilRunnable
	for _, tc := range []struct {
		name string
		r    framework.Runnable
		want string
	}{
		{"nil interface", nil, "r is nil"},
		{"nil pointer", ptr, "r is a nil *framework_test.nilRunnable"},
		{"nil RunnableFunc", framework.RunnableFunc(nil), "r is a nil framework.RunnableFunc"},
	} {
		if err := mgr.Add(tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%s) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// An event regarding a typed nil is not recorded: Eventf logs an error
// naming the argument instead of panicking in the caller's reconcile. A
// typed-nil related object is no related object.
func TestEventfWithTypedNilsDoesNotPanic(t *testing.T) {
	var logs testenv.Buffer
	log := logr.FromSlogHandler(slog.NewTextHandler(&logs, nil))
	mgr := testenv.NewManager(t, fake.Start(t, fake.Options{}).Config(), framework.Options{Logger: log})
	rec := mgr.EventRecorder("typed-nil-test")
	var pod *corev1.Pod
	regarding := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "uid-cm"}}
	if err := eventf(func() { rec.Eventf(pod, nil, corev1.EventTypeNormal, "Synced", "Sync", "synced %d", 1) }); err != nil {
		t.Errorf("Eventf regarding a nil *v1.Pod: %v", err)
	}
	if got := logs.String(); !strings.Contains(got, "event not recorded") || !strings.Contains(got, "regarding is a nil *v1.Pod") {
		t.Errorf("log = %q, want an error saying the event was not recorded because regarding is a nil *v1.Pod", got)
	}
	if err := eventf(func() { rec.Eventf(regarding, pod, corev1.EventTypeNormal, "Synced", "Sync", "synced") }); err != nil {
		t.Errorf("Eventf with a nil *v1.Pod related object: %v", err)
	}
}

// eventf calls f and turns a panic into an error.
func eventf(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	f()
	return nil
}
