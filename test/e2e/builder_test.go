package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
)

var _ = Describe("building controllers", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("leaves the controller name free when building the controller fails", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()

		By("forgetting the kind of an unstructured controller")
		err := framework.NewBuilder[*unstructured.Unstructured](mgr, "retried", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(calls))
		Expect(err).To(MatchError(ContainSubstring("Selection.Kind")))

		By("building it again, with the kind")
		Expect(framework.NewBuilder[*unstructured.Unstructured](mgr, "retried", framework.ControllerOptions{
			Selection: informers.Selection{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		}).CompleteByKey(countingReconciler(calls))).To(Succeed())
		startManager(ctx, mgr)
		createConfigMap(ctx, ns, "seen", nil)
		Eventually(ctx, calls.count(key(ns, "seen"))).Should(Equal(1))
	}, SpecTimeout(time.Minute))
})
