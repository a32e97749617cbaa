// Package testenv shares one real control plane among the integration tests
// of a package, and holds the set-up those tests have in common: a namespace
// per test, and RBAC grants for restricted identities.
//
// A package's TestMain stops the plane after its tests:
//
//	var plane testenv.Plane
//
//	func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }
//
// and each test calls plane.Config(t), which starts it on first use.
//
// testenv is test support only. It imports package framework (to build
// managers for the tests), the one import in the module that goes up the
// layers, so only _test.go files may import it: test/layering fails when any
// other file does.
package testenv

import (
	"fmt"
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

// Plane is a control plane started on first use and shared by the tests of
// one package. The zero value is ready to use.
type Plane struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// Run runs the package's tests, then stops the plane if a test started it,
// and returns the exit code for os.Exit: m.Run's, or 1 if stopping failed.
func (p *Plane) Run(m *testing.M) int {
	code := m.Run()
	if p.env != nil {
		if err := p.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	return code
}

// Config returns the plane's admin config, starting the plane on first use.
// With -short, it skips t instead.
func (p *Plane) Config(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane; skipped with -short")
	}
	p.once.Do(func() {
		p.env = envtest.New(envtest.Options{})
		p.cfg, p.err = p.env.Start(t.Context())
	})
	if p.err != nil {
		t.Fatalf("start control plane: %v", p.err)
	}
	return rest.CopyConfig(p.cfg)
}

// Environment returns the running plane (for AddUser and the like); call
// Config first.
func (p *Plane) Environment() *envtest.Environment { return p.env }

// Namespace creates a namespace of t's own, named after the test and suffix.
// A run with -count=N finds the namespaces of the runs before: it then adds
// a number.
func Namespace(t *testing.T, cs kubernetes.Interface, suffix ...string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(strings.Trim(name, "-")+"-"+strings.Join(suffix, "-"), "-")
	base := name
	for i := 2; ; i++ {
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

// Grant lets user use verbs on resource (of the core group) in namespace
// ns, and nothing else.
func Grant(t *testing.T, cs kubernetes.Interface, ns, user, resource string, verbs ...string) {
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
