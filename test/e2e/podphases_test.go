package e2e_test

import (
	"fmt"
	"os"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ = Describe("the README's complete controller (examples/podphases)", func() {
	It("reconciles a pod, logs through the default logger set-up, and exits 0 on SIGTERM", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// The program takes no flags: it finds the cluster through
		// $KUBECONFIG, as a user's first run would.
		cmd := bins.command(ctx, "podphases")
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", "KUBECONFIG="+env.KubeconfigPath())
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred(), "start podphases")
		DeferCleanup(func() { session.Kill() })

		_, err = kube.CoreV1().Pods(ns).Create(ctx, newPod(ns, "phased"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(session.Err).WithTimeout(30 * time.Second).Should(gbytes.Say(
			fmt.Sprintf(`msg=pod\b.*\bnamespace=%s\b.*\bname=phased\b`, regexp.QuoteMeta(ns))))

		session.Terminate() // SIGTERM, as the kubelet sends
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
	}, SpecTimeout(4*time.Minute))
})
