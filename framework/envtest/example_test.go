package envtest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework/envtest"
)

// Example starts a control plane with the CRDs of a folder, uses it as the admin and as
// a user bound by RBAC, and stops it. In a test, Start and Stop usually sit in TestMain
// or a shared helper, and the context is t.Context(). It needs the binaries (see
// FindBinary), so it only compiles here.
func Example() {
	ctx := context.Background() //nolint:forbidigo // an Example has no *testing.T
	env := envtest.New(envtest.Options{
		CRDs: envtest.CRDOptions{Paths: []string{"testdata/crds"}},
	})
	defer env.Stop()
	cfg, err := env.Start(ctx)
	if err != nil {
		fmt.Println(err) // a missing binary says where it looked and how to build it
		return
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	_, err = admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Data:       map[string]string{"greeting": "world"},
	}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A user holds no permission until RBAC grants one (the grant takes effect within
	// moments, as kube-apiserver's RBAC cache catches up).
	aliceCfg, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"readers"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "readers-read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "readers"}},
	}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = kubernetes.NewForConfigOrDie(aliceCfg) // a client acting as alice

	// kube-apiserver comes back on the same port: clients just carry on.
	if err := env.RestartAPIServer(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("kubectl --kubeconfig", env.KubeconfigPath(), "get configmaps")
}
