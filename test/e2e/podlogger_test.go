package e2e_test

import (
	"fmt"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ = Describe("the podlogger example", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("logs a pod appearing, changing and disappearing, and exits 0 on SIGINT", func(ctx SpecContext) {
		// Built with -race, like the suite (see buildPrograms): the example is
		// the framework's happy path, and a data race in it makes it exit 66.
		// The example serves health probes on :8081 by default; "0" turns them
		// off, so parallel suites (ginkgo -p) and other local processes
		// cannot collide on the port.
		cmd := bins.command(ctx, "podlogger", "--kubeconfig="+env.KubeconfigPath(), "--health-probe-bind-address=0")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred(), "start podlogger")
		DeferCleanup(func() { session.Kill() }) // no-op once it has exited

		// The example logs with slog to standard error, one line per event
		// with the reconcile's key=value pairs, such as
		//   ... msg="pod appeared" controller=podlogger namespace=NS name=NAME reconcileID=1 state="..."
		// The podlogger watches every namespace; matching the namespace and
		// name ignores the pods of other specs.
		const name = "logged"
		says := func(msg string) OmegaMatcher {
			return gbytes.Say(fmt.Sprintf(`%s\b.*\bnamespace=%s\b.*\bname=%s\b`, regexp.QuoteMeta(msg), regexp.QuoteMeta(ns), name))
		}
		pods := kube.CoreV1().Pods(ns)

		By("creating a pod")
		pod, err := pods.Create(ctx, newPod(ns, name), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(session.Err).WithTimeout(30 * time.Second).Should(says("pod appeared"))

		By("making the pod Running and Ready, as a kubelet would")
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(session.Err).WithTimeout(10 * time.Second).Should(says("pod changed"))

		By("deleting the pod at once")
		Expect(pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})).To(Succeed())
		Eventually(session.Err).WithTimeout(10 * time.Second).Should(says("pod disappeared"))

		By("interrupting the podlogger")
		session.Interrupt()
		Eventually(session).WithTimeout(10 * time.Second).Should(gexec.Exit(0))
	}, SpecTimeout(4*time.Minute))
})
