package e2e_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

var _ = Describe("Owns", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reconciles the owner again when an owned object changes", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		var (
			mu sync.Mutex
			// seen is the child Secret's data["v"] as the parent's last
			// reconcile read it from the cache; mu guards it.
			seen string
		)
		parent := reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.record(key(cm.Namespace, cm.Name))
			var child corev1.Secret
			err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: "child"}, &child)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				seen = string(child.Data["v"])
			}
			return reconcile.Result{}, nil
		})
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "parent", framework.ControllerOptions{}).
			Owns(&corev1.Secret{}).
			Complete(parent)).To(Succeed())
		startManager(ctx, mgr)

		cm := createConfigMap(ctx, ns, "parent", nil)
		secrets := kube.CoreV1().Secrets(ns)
		secret, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "child",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: new(true),
				}},
			},
			Data: map[string][]byte{"v": []byte("1")},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A Secret that refers to the parent without controlling it
		// (controller unset) must not enqueue it.
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "bystander",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID,
				}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		seenChild := func() string {
			mu.Lock()
			defer mu.Unlock()
			return seen
		}
		By("the initial reconcile of the parent")
		Eventually(ctx, seenChild).Should(Equal("1"))
		before := calls.count(key(ns, "parent"))()

		By("changing the owned Secret")
		secret.Data["v"] = []byte("2")
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Nothing but the Secret changed: the parent can only see "2" if the
		// Secret's update enqueued it.
		Eventually(ctx, seenChild).Should(Equal("2"))
		Expect(calls.count(key(ns, "parent"))()).To(BeNumerically(">", before))

		By("leaving the parent alone when a Secret it does not control changes")
		settled := calls.count(key(ns, "parent"))()
		Expect(kube.CoreV1().Secrets(ns).Delete(ctx, "bystander", metav1.DeleteOptions{})).To(Succeed())
		Consistently(ctx, calls.count(key(ns, "parent"))).WithTimeout(500 * time.Millisecond).Should(Equal(settled))

		// Only the primary kind's keys are reconciled: the Secrets' own
		// names never reach the ConfigMap reconciler.
		Expect(calls.keys()).To(ConsistOf(key(ns, "parent")))
	}, SpecTimeout(time.Minute))

	It("with OwnedByAny, reconciles every owner of the controller's kind, controller or not, and an owner that was dropped", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "shared-owner", framework.ControllerOptions{}).
			Watches(framework.OwnedByAny(&corev1.Secret{})).
			CompleteByKey(countingReconciler(calls))).To(Succeed())
		startManager(ctx, mgr)

		a, b := createConfigMap(ctx, ns, "a", nil), createConfigMap(ctx, ns, "b", nil)
		Eventually(ctx, calls.count(key(ns, "a"))).Should(Equal(1))
		Eventually(ctx, calls.count(key(ns, "b"))).Should(Equal(1))
		ref := func(cm *corev1.ConfigMap) metav1.OwnerReference {
			return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
		}

		By("creating a Secret both ConfigMaps own, neither as controller")
		secrets := kube.CoreV1().Secrets(ns)
		shared, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "shared", OwnerReferences: []metav1.OwnerReference{ref(a), ref(b)},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(key(ns, "a"))).Should(Equal(2))
		Eventually(ctx, calls.count(key(ns, "b"))).Should(Equal(2))

		By("dropping b from the owners: b notices it lost the Secret")
		shared.OwnerReferences = []metav1.OwnerReference{ref(a)}
		_, err = secrets.Update(ctx, shared, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(key(ns, "a"))).Should(Equal(3))
		Eventually(ctx, calls.count(key(ns, "b"))).Should(Equal(3))
		Expect(calls.keys()).To(ConsistOf(key(ns, "a"), key(ns, "b")))
	}, SpecTimeout(time.Minute))

	It("with OwnsMetadata, reconciles the owner when an owned Secret changes while caching only Secret metadata", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{})
		calls := newRecorder()
		secretMeta := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
		var (
			mu sync.Mutex
			// seen is the child's annotation "v" as the parent's last
			// reconcile read it from the cache; mu guards it.
			seen string
		)
		parent := reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			calls.record(key(cm.Namespace, cm.Name))
			child := &metav1.PartialObjectMetadata{}
			child.SetGroupVersionKind(secretMeta)
			err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name + "-child"}, child)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && cm.Name == "parent" {
				seen = child.Annotations["v"]
			}
			return reconcile.Result{}, nil
		})
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "metadata-parent", framework.ControllerOptions{}).
			OwnsMetadata(&corev1.Secret{}).
			Complete(parent)).To(Succeed())
		startManager(ctx, mgr)

		secrets := kube.CoreV1().Secrets(ns)
		createChild := func(owner *corev1.ConfigMap) *corev1.Secret {
			s, err := secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: ns, Name: owner.Name + "-child", Annotations: map[string]string{"v": "1"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: new(true),
					}},
				},
				Data: map[string][]byte{"password": []byte("s3cret")},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return s
		}
		child := createChild(createConfigMap(ctx, ns, "parent", nil))
		createChild(createConfigMap(ctx, ns, "neighbour", nil))
		seenChild := func() string {
			mu.Lock()
			defer mu.Unlock()
			return seen
		}
		Eventually(ctx, seenChild).Should(Equal("1"))

		By("changing the owned Secret's metadata")
		before := calls.count(key(ns, "parent"))()
		child.Annotations["v"] = "2"
		child, err := secrets.Update(ctx, child, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, seenChild).Should(Equal("2"))
		Expect(calls.count(key(ns, "parent"))()).To(BeNumerically(">", before))

		By("changing only the owned Secret's data: the metadata watch still sees it")
		before = calls.count(key(ns, "parent"))()
		neighbour := calls.count(key(ns, "neighbour"))()
		child.Data["password"] = []byte("rotated")
		_, err = secrets.Update(ctx, child, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, calls.count(key(ns, "parent"))).Should(BeNumerically(">", before))
		Expect(calls.count(key(ns, "neighbour"))()).To(Equal(neighbour), "the Secret of another owner did not change")

		By("holding Secrets as metadata only")
		var secretInformers []informers.InformerStats
		for _, st := range mgr.Cache().Stats() {
			if st.Kind.GroupKind() == secretMeta.GroupKind() {
				secretInformers = append(secretInformers, st)
			}
		}
		Expect(secretInformers).To(HaveLen(1))
		Expect(secretInformers[0].Mode).To(Equal(informers.Metadata))
		Expect(secretInformers[0].Objects).To(Equal(2))
	}, SpecTimeout(time.Minute))
})
