package e2e_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/object"
)

// dbPassword is a literal environment value of a Job the API server
// refuses to change, which quotes the Job's template back.
const dbPassword = "s3cr3t-710cfdfd6e21ff09"

var _ = Describe("errors shown without object data", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("never shows a literal environment value the API server quotes back when it refuses a Job's template: not in the log, the Ready condition, Events, converge explain or the debug endpoint", func(ctx SpecContext) {
		explain(ctx, "--help")     // builds converge once, outside the Eventually below
		logs := gbytes.NewBuffer() // safe for concurrent use
		mgr := newManager(ns, framework.Options{
			Logger:  logr.FromSlogHandler(slog.NewTextHandler(io.MultiWriter(logs, GinkgoWriter), nil)),
			Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			j := migrationJob(site.Name+"-migrate", imageOf(site))
			j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DB_PASSWORD", Value: dbPassword}}
			return declarative.State{Children: []any{declarative.NewChild(j)}, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}), declarative.Options{ChildKinds: []object.Object{&batchv1.Job{}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "shown", framework.ControllerOptions{}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		createSite(ctx, ns, "plain", anySpec)
		Eventually(ctx, jobOf(ctx, ns, "plain-migrate")).ShouldNot(BeNil())

		By("changing the Job's image, which the API server refuses, quoting the template")
		patchSite(ctx, ns, "plain", `{"metadata":{"labels":{"image":"busybox_2"}}}`)
		const cause = "spec.template: Invalid value: field is immutable"
		Eventually(ctx, siteReadyCondition(ctx, ns, "plain")).Should(readyWith(declarative.ChildFailedReason, cause))
		Eventually(ctx, func() int { return strings.Count(string(logs.Contents()), "reconcile failed") }).Should(BeNumerically(">=", 2),
			"the refusal is logged")
		Expect(string(logs.Contents())).To(ContainSubstring(cause))

		base := "http://" + mgr.MetricsAddress()
		code, out := explain(ctx, "StaticSite", ns+"/plain", "--url", base)
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(cause))
		object, err := httpGet(ctx, http.DefaultClient, base+introspect.Path+"api/object?"+url.Values{"kind": {"StaticSite"}, "namespace": {ns}, "name": {"plain"}}.Encode())()
		Expect(err).NotTo(HaveOccurred())
		Expect(object.Body).To(ContainSubstring(`Job.batch \"plain-migrate\" is invalid: spec.template: Invalid value: field is immutable`))
		page, err := httpGet(ctx, http.DefaultClient, base+introspect.Path+"?"+url.Values{"controller": {"shown"}, "key": {ns + "/plain"}}.Encode())()
		Expect(err).NotTo(HaveOccurred())
		site, err := getSite(ctx, ns, "plain")
		Expect(err).NotTo(HaveOccurred())
		events, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for what, text := range map[string]string{
			"the log": string(logs.Contents()), "converge explain": out, "the debug endpoint": object.Body, "the debug page": page.Body,
			"the Ready condition": site.Status.Conditions[0].Message, "the Events": eventNotes(events.Items),
		} {
			Expect(text).NotTo(ContainSubstring(dbPassword), "%s shows the Job's literal environment value", what)
		}
	}, SpecTimeout(2*time.Minute))
})

// eventNotes returns the notes of events, one a line.
func eventNotes(events []eventsv1.Event) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Note + "\n")
	}
	return b.String()
}
