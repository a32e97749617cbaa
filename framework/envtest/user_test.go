package envtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestAddUserIsBoundByRBAC(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	ctx := t.Context()
	admin := clientset(t, env.Config())
	ns := newNamespace(t, admin)

	userCfg, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"team-a"}})
	if err != nil {
		t.Fatalf("AddUser: %v", err)
	}
	alice := clientset(t, userCfg)

	_, err = alice.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists pods without a role: err = %v, want 403 Forbidden", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-a-reads-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-a"}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}

	// The RBAC authorizer reads roles from an informer: the grant lands within moments.
	eventually(t, 10*time.Second, "alice lists pods once bound", func(ctx context.Context) error {
		var code int
		res := alice.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Do(ctx).StatusCode(&code)
		if code != 200 {
			return fmt.Errorf("status %d: %v", code, res.Error())
		}
		return nil
	})
	// Only what was granted: listing secrets stays forbidden.
	if _, err := alice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists secrets: err = %v, want 403 Forbidden", err)
	}
}
