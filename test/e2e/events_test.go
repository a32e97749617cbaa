package e2e_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

var _ = Describe("events", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("writes what a reconciler records as an events.k8s.io/v1 Event regarding the object, reported by the recorder's name", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		recorder := mgr.EventRecorder("greeter")
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "greeter", framework.ControllerOptions{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(_ context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				recorder.Eventf(cm, nil, corev1.EventTypeNormal, "Greeted", "Greet", "hello %s", cm.Name)
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		cm := createConfigMap(ctx, ns, "greeted", nil)

		events := func() ([]eventsv1.Event, error) {
			list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		}
		Eventually(ctx, events).Should(ConsistOf(And(
			HaveField("ReportingController", "greeter"),
			HaveField("ReportingInstance", Not(BeEmpty())),
			HaveField("Reason", "Greeted"),
			HaveField("Action", "Greet"),
			HaveField("Note", "hello greeted"),
			HaveField("Type", corev1.EventTypeNormal),
			HaveField("Regarding", And(
				HaveField("Kind", "ConfigMap"),
				HaveField("APIVersion", "v1"),
				HaveField("Namespace", ns),
				HaveField("Name", cm.Name),
				HaveField("UID", cm.UID),
			)),
		)))
	}, SpecTimeout(time.Minute))
})
