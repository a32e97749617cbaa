package e2e_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

var _ = Describe("sources and predicates", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reconciles the objects a Map source maps each event to, deletions included", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		// Each Secret labelled for=NAME asks for the ConfigMap NAME.
		forLabel := func(_ context.Context, s *corev1.Secret) []reconcile.Request {
			if name := s.Labels["for"]; name != "" {
				return []reconcile.Request{key(s.Namespace, name)}
			}
			return nil
		}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "mapped", framework.ControllerOptions{}).
			Watches(framework.Map(forLabel)).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		startManager(ctx, mgr)

		target := key(ns, "target")
		createConfigMap(ctx, ns, target.Name, nil)
		Eventually(ctx, calls.count(target)).Should(Equal(1))
		secrets := kube.CoreV1().Secrets(ns)

		By("creating a Secret that maps to it")
		before := calls.count(target)()
		secret, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pointer", Labels: map[string]string{"for": target.Name}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(target)).Should(BeNumerically(">", before))

		By("changing the Secret")
		before = calls.count(target)()
		secret.StringData = map[string]string{"v": "2"}
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(target)).Should(BeNumerically(">", before))

		By("deleting the Secret: the map function sees its last state")
		before = calls.count(target)()
		Expect(secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, calls.count(target)).Should(BeNumerically(">", before))

		// Requests name what the map returned, never the Secret itself.
		Expect(calls.keys()).To(ConsistOf(target))
	}, SpecTimeout(time.Minute))

	It("lets only the events its predicates accept enqueue the primary object", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "labels-only", framework.ControllerOptions{}).
			WithPredicates(framework.LabelsChanged[*corev1.ConfigMap]).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		startManager(ctx, mgr)
		cms := kube.CoreV1().ConfigMaps(ns)
		k := key(ns, "filtered")

		By("creating the object: adds always pass")
		cm, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Name, Labels: map[string]string{"tier": "a"}},
			Data:       map[string]string{"v": "1"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(k)).Should(Equal(1))

		By("changing only its data: filtered out")
		cm.Data["v"] = "2"
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(ctx, calls.count(k)).WithTimeout(500 * time.Millisecond).Should(Equal(1))

		By("changing its labels: accepted")
		cm.Labels["tier"] = "b"
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(k)).Should(Equal(2))

		By("deleting it: deletions always pass")
		Expect(cms.Delete(ctx, k.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, calls.count(k)).Should(Equal(3))
	}, SpecTimeout(time.Minute))
})
