package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// eventsIn returns a function reporting the events.k8s.io/v1 Events of
// namespace ns, for Eventually.
func eventsIn(ctx context.Context, ns string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
}

var _ = Describe("event recording", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("stores an event recorded without an action, which the API server requires, with the reason as its action", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		recorder := mgr.EventRecorder("greeter")
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "greeter", framework.ControllerOptions{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(_ context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				recorder.Eventf(cm, nil, corev1.EventTypeWarning, "Greeted", "", "hello %s", cm.Name)
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		cm := createConfigMap(ctx, ns, "greeted", nil)

		Eventually(ctx, eventsIn(ctx, ns)).WithTimeout(30 * time.Second).Should(ConsistOf(And(
			HaveField("Reason", "Greeted"),
			HaveField("Action", "Greeted"),
			HaveField("Note", "hello greeted"),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Regarding.UID", cm.UID),
		)))
	}, SpecTimeout(time.Minute))

	It("logs an event the API server rejects in one line naming the object it regards, not the whole event", func(ctx SpecContext) {
		logs := &logCapture{}
		mgr := newManager(ns, framework.Options{Logger: logs.logger()})
		// A reportingController must be a qualified name: the server
		// rejects every event of this recorder.
		recorder := mgr.EventRecorder("not a valid name!")
		const marker = "a note that must not reach the log"
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "rejected", framework.ControllerOptions{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(_ context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				recorder.Eventf(cm, nil, corev1.EventTypeNormal, "Noted", "Note", marker)
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		createConfigMap(ctx, ns, "noted", nil)

		mentions := func(s string) func() []string {
			return func() []string {
				var out []string
				for _, line := range logs.all() {
					if l := fmt.Sprint(line); strings.Contains(l, s) {
						out = append(out, l)
					}
				}
				return out
			}
		}
		// The line about the event names the ConfigMap; wait for it.
		Eventually(ctx, mentions("noted")).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		Consistently(ctx, mentions("noted")).WithTimeout(time.Second).Should(HaveLen(1), "the rejection is logged more than once")
		line := mentions("noted")()[0]
		GinkgoWriter.Println("the rejection:", line)
		Expect(line).To(And(ContainSubstring("reportingController"), ContainSubstring(ns+"/noted"), ContainSubstring("Noted")))
		for _, body := range []string{marker, "reportingInstance", "eventTime", "Regarding", "regarding:{"} {
			Expect(mentions(body)()).To(BeEmpty(), "the log holds the event's body (%q)", body)
		}
		Expect(kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})).To(HaveField("Items", BeEmpty()))
	}, SpecTimeout(time.Minute))
})
