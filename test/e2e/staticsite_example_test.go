package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
)

var _ = Describe("the staticsite example", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("applies a StaticSite's children and reports it Ready, and the garbage collector removes them with the site", func(ctx SpecContext) {
		// "0" turns the example's probes (on :8081 by default) off, so that
		// parallel suites and other local processes cannot collide on the port.
		cmd := bins.command(ctx, "staticsite", "--kubeconfig="+env.KubeconfigPath(), "--health-probe-bind-address=0")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred(), "start staticsite")
		DeferCleanup(func() { session.Kill() }) // no-op once it has exited

		site := createSite(ctx, ns, "hello", v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "<h1>Hello</h1>"}, MinAvailable: new(int32(1))})
		Eventually(ctx, siteReady(ctx, ns, site.Name)).WithTimeout(time.Minute).Should(Succeed())
		cm, deploy, svc, pdb := siteChildren(ctx, ns, site.Name)
		for _, child := range []any{cm, deploy, svc, pdb} {
			Expect(child).NotTo(BeNil())
			Expect(child).To(controlledBy(site))
			Expect(child).To(appliedBy(siteFieldManager))
		}
		Expect(cm.Data).To(Equal(site.Spec.Pages))
		Expect(session.Err).To(gbytes.Say(`applied child`))

		By("deleting the site: no finalizer, so the garbage collector deletes the children")
		got, err := getSite(ctx, ns, site.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Finalizers).To(BeEmpty())
		deleted := time.Now()
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		// kube-controller-manager's garbage collector may first have to
		// discover the StaticSite kind (it rescans every 30 s).
		Eventually(ctx, childrenLeft(ctx, ns, site.Name)).WithTimeout(90 * time.Second).Should(BeEmpty())
		GinkgoWriter.Printf("the garbage collector removed the children %v after the site was deleted\n", time.Since(deleted).Round(time.Millisecond))
		AddReportEntry("garbage collection of a deleted StaticSite's children", time.Since(deleted).Round(time.Millisecond).String())

		By("interrupting the example")
		session.Interrupt()
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
	}, SpecTimeout(4*time.Minute))
})
