package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fleetExampleSpecs are the fleet specs of examples/fleet, run as a
// process on the suite's control plane, the hub; members returns a, b
// and c once BeforeAll started them.
func fleetExampleSpecs(members func() []*fleetMember) {
	It("examples/fleet copies the hub's policy into every engaged cluster, reverts edits there, and deletes the copies with it", func(ctx SpecContext) {
		ms := members()
		a, b, c := ms[0], ms[1], ms[2]
		ns := newNamespace(ctx)
		policy, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "policy", Labels: map[string]string{"fleet.converge.dev/policy": "true"}},
			Data:       map[string]string{"k": "v1"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		createConfigMap(ctx, ns, "not-a-policy", map[string]string{"k": "hub only"})
		for _, m := range ms {
			m.mirror(ctx, ns)
		}
		a.engage(ctx, ns)
		b.engage(ctx, ns)

		cmd := bins.command(ctx, "fleet", "--namespace", ns)
		cmd.Env = append(cmd.Env, "KUBECONFIG="+env.KubeconfigPath())
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred(), "start examples/fleet")
		DeferCleanup(func() {
			session.Terminate()
			Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
		})
		copyOf := func(cs kubernetes.Interface, name string) func() string {
			return func() string {
				cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return "<none>"
				}
				Expect(err).NotTo(HaveOccurred())
				return cm.Data["k"]
			}
		}
		for _, m := range []*fleetMember{a, b} {
			Eventually(copyOf(m.kube, "policy")).WithTimeout(time.Minute).Should(Equal("v1"), "the policy is copied into %s", m.name)
		}
		setK(ctx, a.kube, ns, "policy", "edited")
		Eventually(copyOf(a.kube, "policy")).Should(Equal("v1"), "an edit of the copy in a is reverted")
		setK(ctx, kube, ns, "policy", "v2")
		for _, m := range []*fleetMember{a, b} {
			Eventually(copyOf(m.kube, "policy")).Should(Equal("v2"), "the hub's change reaches %s", m.name)
		}
		c.engage(ctx, ns)
		Eventually(copyOf(c.kube, "policy")).WithTimeout(30*time.Second).Should(Equal("v2"), "a cluster engaged later gets the policy")
		for _, m := range ms {
			Expect(copyOf(m.kube, "not-a-policy")()).To(Equal("<none>"), "a ConfigMap without the label was copied into %s", m.name)
		}

		Expect(kube.CoreV1().ConfigMaps(ns).Delete(ctx, policy.Name, metav1.DeleteOptions{})).To(Succeed())
		for _, m := range ms {
			Eventually(copyOf(m.kube, "policy")).Should(Equal("<none>"), "the copy in %s is deleted with the hub's policy", m.name)
		}
	})
}
