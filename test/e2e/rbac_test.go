package e2e_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
)

// unprivileged returns the config of a new user, named after ns, that RBAC
// grants nothing beyond what every authenticated user may do (discovery).
func unprivileged(ctx context.Context, ns string) (*rest.Config, string) {
	GinkgoHelper()
	user := "controller-" + ns
	userCfg, err := env.AddUser(envtest.User{Name: user})
	Expect(err).NotTo(HaveOccurred())
	return userCfg, user
}

// grantConfigMapReads lets user get, list and watch ConfigMaps in ns.
func grantConfigMapReads(ctx context.Context, ns, user string) {
	GinkgoHelper()
	_, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-reads-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("RBAC", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("fails Start with an error naming the resource its identity may not list", func(ctx SpecContext) {
		userCfg, _ := unprivileged(ctx, ns)
		const syncTimeout = 3 * time.Second
		mgr, err := framework.NewManager(userCfg, managerOptions(ns, framework.Options{Cache: informers.Options{SyncTimeout: syncTimeout}}))
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "forbidden", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(newRecorder()))).To(Succeed())

		run := runManager(ctx, mgr)
		Eventually(ctx, run.done).WithTimeout(syncTimeout+10*time.Second).Should(BeClosed(), "Start hangs on a kind it may not list")
		startErr := run.err
		GinkgoWriter.Printf("Start: %v\n", startErr)
		Expect(startErr).To(HaveOccurred())
		Expect(startErr.Error()).To(And(ContainSubstring("ConfigMap"), ContainSubstring("forbidden"), ContainSubstring("configmaps")))
		var syncErr *informers.SyncError
		Expect(errors.As(startErr, &syncErr)).To(BeTrue(), "the error is not an *informers.SyncError")
		Expect(syncErr.Resource).To(Equal("configmaps"))
	}, SpecTimeout(time.Minute))

	It("starts reconciling once its identity is granted access, without a restart", func(ctx SpecContext) {
		userCfg, user := unprivileged(ctx, ns)
		mgr, err := framework.NewManager(userCfg, managerOptions(ns, framework.Options{Cache: informers.Options{SyncTimeout: -1}}))
		Expect(err).NotTo(HaveOccurred())
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "granted-later", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		run := startManager(ctx, mgr)
		createConfigMap(ctx, ns, "waiting", nil)

		By("waiting, not failing, while access is denied")
		Eventually(ctx, mgr.Cache().Health).Should(MatchError(ContainSubstring("forbidden")))
		Expect(run.done).NotTo(BeClosed())

		By("granting access")
		grantConfigMapReads(ctx, ns, user)
		// The reflector retries with a jittered backoff that has grown while
		// access was denied; RBAC grants also take a moment to apply.
		Eventually(ctx, calls.count(key(ns, "waiting"))).WithTimeout(45 * time.Second).Should(Equal(1))
		Expect(mgr.Cache().Health()).To(Succeed())
	}, SpecTimeout(2*time.Minute))
})
