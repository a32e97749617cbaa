// Package chaos_test attacks a converge controller, run as its own process
// behind a TCP proxy, with the faults a real cluster produces: kube-apiserver
// crashes, expired watches, half-open connections, panicking and hanging
// reconcilers, SIGTERM mid-load, and a CRD and RBAC that arrive late. Each
// fault runs during a stream of spec updates; afterwards every object must
// converge, no key may have been reconciled twice at once, the controller's
// cache must equal a fresh LIST, and the controller must exit cleanly.
//
// `make chaos` runs it at full size (CHAOS_FULL=1); `make test` at a smaller one.
package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/faultproxy"
)

var s *suite

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		var err error
		s, err = setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos setup:", err)
			return 1
		}
		defer func() {
			_ = s.proxy.Close()
			_ = s.env.Stop()
			_ = os.RemoveAll(s.dir)
		}()
		code := m.Run()
		fmt.Println(s.table())
		return code
	}()
	os.Exit(code)
}

func setup() (*suite, error) {
	dir, err := os.MkdirTemp("", "converge-chaos-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "chaosctl")
	build := exec.Command("go", "build", "-race", "-o", bin, "./chaosctl")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build chaosctl: %w", err)
	}
	// Watches go straight to etcd (no watch cache), so a compaction expires
	// them as it would in a cluster once the watch cache's window has passed.
	env := envtest.New(envtest.Options{
		APIServerFlags: []string{"--watch-cache=false"},
		CRDs:           envtest.CRDOptions{Paths: []string{"testdata/widgets.yaml"}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := env.Start(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(admin.Host)
	if err != nil {
		return nil, err
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		return nil, err
	}
	return &suite{
		env: env, admin: admin, proxy: p, bin: bin, dir: dir, scale: scaleFromEnv(),
		cs:  kubernetes.NewForConfigOrDie(admin),
		dyn: dynamic.NewForConfigOrDie(admin),
	}, nil
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: needs a control plane")
	}
}

// viaProxy is a kubeconfig for cfg's identity that reaches the API server
// through the proxy.
func viaProxy(t *testing.T, cfg *rest.Config, name string) string {
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + s.proxy.Addr()
	return kubeconfigFor(t, t.TempDir(), name, cfg)
}

// fault runs one fault: controller up, objects converged, then inject runs
// while the update stream does; afterwards everything is checked and a row
// is recorded.
func fault(t *testing.T, name string, extraFlags []string, inject func(t *testing.T, w *workload, ctl **controllerProcess, kubeconfig, trace string), after func(t *testing.T, ctl *controllerProcess)) {
	skipShort(t)
	s.proxy.SetMode(faultproxy.Pass, 0)
	w := s.newWorkload(t, widgets, "Widget", true)
	kubeconfig := viaProxy(t, s.admin, "controller")
	trace := filepath.Join(t.TempDir(), "trace")
	ctl := s.startController(t, kubeconfig, w.namespace, trace, extraFlags...)
	w.awaitConvergence(t, ctl, time.Minute)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	streamed := make(chan struct{})
	go func() { defer close(streamed); w.stream(ctx, s.scale.updates) }()
	inject(t, w, &ctl, kubeconfig, trace)
	<-streamed
	s.proxy.SetMode(faultproxy.Pass, 0)

	took, converged := w.awaitConvergence(t, ctl, 2*time.Minute)
	relists := w.cacheMatchesList(t, ctl)
	if after != nil {
		after(t, ctl)
	}
	ctl.stop(t)
	ov := overlaps(t, trace)
	if ov != 0 {
		t.Errorf("%d reconciles overlapped another reconcile of the same key", ov)
	}
	s.record(result{fault: name, objects: len(w.names), updates: int(w.updates.Load()), converged: converged,
		maxConvergence: took, overlaps: ov, relists: relists})
}

// during runs f at about the middle of the update stream.
func midStream() time.Duration {
	return time.Duration(float64(s.scale.updates) / s.scale.rate / 3 * float64(time.Second))
}

func TestAPIServerKilled(t *testing.T) {
	fault(t, "kube-apiserver SIGKILL + restart", nil, func(t *testing.T, _ *workload, _ **controllerProcess, _, _ string) {
		for i := range s.scale.restarts {
			time.Sleep(midStream() / time.Duration(s.scale.restarts))
			if err := s.env.KillAPIServer(); err != nil {
				t.Fatalf("kill %d: %v", i, err)
			}
			if err := s.env.StartAPIServer(t.Context()); err != nil {
				t.Fatalf("restart %d: %v", i, err)
			}
		}
	}, nil)
}

func TestWatchExpiry(t *testing.T) {
	fault(t, "watch expired (410) while blackholed", nil, func(t *testing.T, _ *workload, ctl **controllerProcess, _, _ string) {
		time.Sleep(midStream())
		var before struct{ Relists int64 }
		if err := getJSON(t.Context(), "http://"+(*ctl).debug+"/cache", &before); err != nil {
			t.Fatal(err)
		}
		s.proxy.SetMode(faultproxy.Blackhole, 0)
		time.Sleep(2 * time.Second) // updates keep landing in etcd meanwhile
		if _, err := s.env.CompactEtcd(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		s.proxy.SetMode(faultproxy.Pass, 0)
		s.proxy.ResetAll() // the watch breaks; its resource version is compacted
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var now struct{ Relists int64 }
			if getJSON(ctx, "http://"+(*ctl).debug+"/cache", &now) != nil {
				return false, nil
			}
			return now.Relists > before.Relists, nil
		})
		if err != nil {
			t.Fatalf("the informer did not relist after its watch expired: %v", err)
		}
	}, nil)
}

func TestHalfOpenConnection(t *testing.T) {
	fault(t, "half-open connection (blackhole 12s)", nil, func(t *testing.T, _ *workload, _ **controllerProcess, _, _ string) {
		time.Sleep(midStream())
		// Longer than the HTTP/2 health check (4 s idle + 2 s ping here).
		s.proxy.SetMode(faultproxy.Blackhole, 0)
		time.Sleep(12 * time.Second)
		s.proxy.SetMode(faultproxy.Pass, 0)
	}, nil)
}

func TestPanicsAndHangs(t *testing.T) {
	fault(t, "1% panics + 1% hangs (timeout 1s)",
		[]string{"--panic-rate=0.01", "--hang-rate=0.01", "--reconcile-timeout=1s"},
		func(t *testing.T, _ *workload, _ **controllerProcess, _, _ string) {},
		func(t *testing.T, ctl *controllerProcess) {
			// The metrics count exactly what was injected.
			var injected map[string]int64
			var panics, timeouts float64
			err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				if getJSON(ctx, "http://"+ctl.debug+"/injected", &injected) != nil {
					return false, nil
				}
				_, body, err := getText(ctx, "http://"+ctl.metrics+"/metrics")
				if err != nil {
					return false, nil
				}
				panics = metric(body, `controller_runtime_reconcile_panics_total{controller="chaos"}`)
				timeouts = metric(body, `converge_reconcile_timeouts_total{controller="chaos"}`)
				return injected["panics"] > 0 && float64(injected["panics"]) == panics && float64(injected["hangs"]) == timeouts, nil
			})
			if err != nil {
				t.Errorf("metrics: %v panics and %v timeouts, injected %v", panics, timeouts, injected)
			}
			t.Logf("injected %d panics and %d hangs; metrics agree", injected["panics"], injected["hangs"])
		})
}

func TestSIGTERMAndRestart(t *testing.T) {
	fault(t, "SIGTERM mid-load, then restart", nil, func(t *testing.T, w *workload, ctl **controllerProcess, kubeconfig, trace string) {
		time.Sleep(midStream())
		(*ctl).stop(t)
		*ctl = s.startController(t, kubeconfig, w.namespace, trace)
	}, nil)
}

// TestLateCRDAndRBAC starts the controller as a user that may not list
// gadgets, before their CRD exists: it must report why it is not ready, and
// recover without a restart once the CRD is installed and RBAC allows it.
func TestLateCRDAndRBAC(t *testing.T) {
	skipShort(t)
	gadgets := schema.GroupVersionResource{Group: "late.converge.dev", Version: "v1", Resource: "gadgets"}
	user, err := s.env.AddUser(envtest.User{Name: "late-controller"})
	if err != nil {
		t.Fatal(err)
	}
	w := s.newWorkload(t, gadgets, "Gadget", false)
	trace := filepath.Join(t.TempDir(), "trace")
	ctl := s.startController(t, viaProxy(t, user, "late"), w.namespace, trace,
		"--kind=late.converge.dev/v1/Gadget", "--sync-timeout=-1s")

	readyz := func(want string) {
		t.Helper()
		var body string
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			ctl.crashed(t)
			code, b, err := getText(ctx, "http://"+ctl.probes+"/readyz")
			body = b
			if err != nil {
				return false, nil
			}
			if want == "" {
				return code == 200, nil
			}
			return code == 503 && strings.Contains(b, want), nil
		})
		if err != nil {
			t.Fatalf("/readyz never showed %q; last body:\n%s", want, body)
		}
	}
	readyz("is its CRD installed?")
	if err := s.env.InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{"testdata/gadgets.yaml"}}); err != nil {
		t.Fatal(err)
	}
	readyz("forbidden")
	grantGadgets(t, "late-controller")
	readyz("")

	w.create(t, "Gadget")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w.stream(ctx, s.scale.updates/3)
	took, converged := w.awaitConvergence(t, ctl, 2*time.Minute)
	relists := w.cacheMatchesList(t, ctl)
	ctl.stop(t)
	ov := overlaps(t, trace)
	if ov != 0 {
		t.Errorf("%d overlapping reconciles", ov)
	}
	s.record(result{fault: "CRD late, then LIST forbidden→allowed", objects: len(w.names), updates: int(w.updates.Load()),
		converged: converged, maxConvergence: took, overlaps: ov, relists: relists})
}

func grantGadgets(t *testing.T, user string) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets-controller"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"late.converge.dev"}, Resources: []string{"gadgets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"late.converge.dev"}, Resources: []string{"gadgets/status"}, Verbs: []string{"patch", "update"}},
		},
	}
	if _, err := s.cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}
	if _, err := s.cs.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of one series in a Prometheus text exposition.
func metric(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, series+" "), &v)
			return v
		}
	}
	return 0
}
