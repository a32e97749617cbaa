package informers_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

// env is the control plane shared by this package's tests, started on first use.
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
	name = strings.Trim(name+"-"+strings.Join(suffix, "-"), "-")
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

// requestLog records the API requests a config makes.
type requestLog struct {
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path, query, accept string
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.requests = append(l.requests, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// matching returns the recorded requests whose path ends with suffix.
func (l *requestLog) matching(suffix string) []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recorded
	for _, r := range l.requests {
		if strings.HasSuffix(r.path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func envtestUser(name string) envtest.User { return envtest.User{Name: name} }

// grant lets user get, list and watch resource in ns.
func grant(t *testing.T, cs kubernetes.Interface, ns, user, resource string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + resource, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
