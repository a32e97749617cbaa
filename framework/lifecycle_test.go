package framework_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/reconcile"
)

// logLines collects log lines; safe for concurrent use, also after the test.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) matching(substrs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		ok := true
		for _, s := range substrs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func TestStartReturnsWhenAReconcileIgnoresItsContext(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	const grace = time.Second
	logs := &logLines{}
	mgr := testenv.NewManager(t, admin, framework.Options{
		Cache:                   informers.Options{Namespace: ns},
		GracefulShutdownTimeout: grace,
		Logger:                  funcr.New(logs.add, funcr.Options{}),
	})
	began := make(chan struct{})
	release := make(chan struct{})
	written := make(chan error, 1)
	var once sync.Once
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "stubborn", framework.ControllerOptions{}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Name != "stuck" {
				return reconcile.Result{}, nil
			}
			once.Do(func() { close(began) })
			<-release // ignores ctx
			written <- mgr.Client().Create(context.WithoutCancel(ctx), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-write"}})
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	r := testenv.StartManager(t, mgr)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	testenv.CreateConfigMap(t, cs, ns, "stuck", nil)
	select {
	case <-began:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconcile never began")
	}

	stopped := time.Now()
	r.Cancel()
	// GracefulShutdownTimeout, then 2 s for cancelled reconciles to return;
	// the rest is margin for a loaded machine.
	const bound = grace + 2*time.Second + 5*time.Second
	select {
	case <-r.Done:
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("Start did not return %v after its context was cancelled, with GracefulShutdownTimeout %v", bound+10*time.Second, grace)
	}
	took := r.Returned.Sub(stopped)
	t.Logf("Start returned %v after cancellation: %v", took.Round(time.Millisecond), r.Err)
	if took > bound {
		t.Errorf("Start returned %v after cancellation, want at most %v", took, bound)
	}
	if took < grace {
		t.Errorf("Start returned %v after cancellation, before GracefulShutdownTimeout %v", took, grace)
	}
	if !errors.Is(r.Err, framework.ErrNotStopped) {
		t.Errorf("Start = %v, want an error wrapping ErrNotStopped", r.Err)
	}
	for _, want := range []string{`controller "stubborn"`, ns + "/stuck"} {
		if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("Start's error %v does not name %s", r.Err, want)
		}
	}
	if len(logs.matching("abandoning", "stubborn", ns+"/stuck")) == 0 {
		t.Errorf("no log line names the abandoned reconcile by controller and key; logs:\n%s", strings.Join(logs.matching(""), "\n"))
	}

	// The manager stopped: its client writes no more, even for the
	// reconcile it left behind.
	err = mgr.Client().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after-stop"}})
	if !errors.Is(err, framework.ErrManagerStopped) {
		t.Errorf("Create after Start returned = %v, want ErrManagerStopped", err)
	}
	close(release)
	select {
	case err := <-written:
		if !errors.Is(err, framework.ErrManagerStopped) {
			t.Errorf("the abandoned reconcile's write = %v, want ErrManagerStopped", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the released reconcile never wrote")
	}
	for _, name := range []string{"after-stop", "late-write"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s written after the manager stopped: %v", name, err)
		}
	}
}
