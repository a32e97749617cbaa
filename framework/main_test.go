package framework_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
)

// env is the control plane shared by this package's integration tests,
// started on first use.
var env struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if env.env != nil {
		if err := env.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// controlPlane returns the shared control plane's admin config.
func controlPlane(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane; skipped with -short")
	}
	env.once.Do(func() {
		env.env = envtest.New(envtest.Options{})
		env.cfg, env.err = env.env.Start(t.Context())
	})
	if env.err != nil {
		t.Fatalf("start control plane: %v", env.err)
	}
	return rest.CopyConfig(env.cfg)
}

// namespace creates a namespace of t's own, named after the test and suffix.
func namespace(t *testing.T, cs kubernetes.Interface, suffix ...string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(strings.Trim(name, "-")+"-"+strings.Join(suffix, "-"), "-")
	base := name
	for i := 2; ; i++ { // a run with -count=N finds the namespaces of the last
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err == nil {
			return name
		}
		if !apierrors.IsAlreadyExists(err) || i > 100 {
			t.Fatal(err)
		}
		name = base + "-" + strconv.Itoa(i)
	}
}

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

// grantVerbs lets user use verbs on resource in ns, and nothing else.
func grantVerbs(t *testing.T, cs kubernetes.Interface, ns, user, resource string, verbs ...string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + resource, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: verbs}},
	}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: rbacv1.GroupName}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func envtestUser(name string) envtest.User { return envtest.User{Name: name} }
