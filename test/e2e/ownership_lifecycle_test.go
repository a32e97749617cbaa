package e2e_test

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

var _ = Describe("declarative children ownership over time", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })
	configMaps := []object.Object{&corev1.ConfigMap{}}

	It("reports no conflict to a parent re-created under the same name while the garbage collector still holds the old parent's child", func(ctx SpecContext) {
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{})
		old := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"page": "v1"}})
		Eventually(ctx, configMap(ctx, ns, "page")).WithTimeout(30 * time.Second).Should(controlledBy(old))

		By("holding the child with a finalizer, deleting the parent and creating it again")
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "page", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":["e2e.converge.dev/hold"]}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, old.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, old.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"page": "v2"}})

		// The child the old parent controls is the garbage collector's to
		// delete, not someone else's object: no conflict is reported.
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(ContainElement(HaveField("Type", "Ready")))
		Expect(siteConditions(ctx, ns, site.Name)()).NotTo(ContainElement(HaveField("Type", declarative.ChildConflictCondition)))
		Consistently(ctx, conflictEvents(ctx, site)).WithTimeout(3 * time.Second).Should(BeEmpty())

		By("releasing the old child: the new parent's child replaces it")
		_, err = kube.CoreV1().ConfigMaps(ns).Patch(ctx, "page", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, configMap(ctx, ns, "page")).WithTimeout(30 * time.Second).Should(And(
			controlledBy(site), HaveField("Data", HaveKeyWithValue("content", "v2"))))
		Expect(conflictEvents(ctx, site)()).To(BeEmpty())
	}, SpecTimeout(2*time.Minute))

	It("applies a child as soon as the object it conflicted with is deleted, without waiting out the retry backoff", func(ctx SpecContext) {
		createConfigMap(ctx, ns, "taken", map[string]string{"content": "by hand"})
		pages := newPageMaps()
		mgr := newManager(ns, framework.Options{})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		// A failed reconcile is retried an hour later: only an event can
		// reconcile the parent again within the spec.
		hourly := clientworkqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour)
		d, err := declarative.New(mgr, pages, declarative.Options{ChildKinds: configMaps})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{RateLimiter: hourly}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"taken": "converge"}})
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(
			ContainElement(HaveField("Type", declarative.ChildConflictCondition)))
		// Writing the condition reconciled the parent once more; then it waits.
		count, last := pages.desired.count(key(ns, site.Name)), -1
		Eventually(ctx, func() bool {
			now := count()
			settled := now >= 2 && now == last
			last = now
			return settled
		}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(BeTrue(), "the parent is still being reconciled")

		By("deleting the hand-made object")
		Expect(kube.CoreV1().ConfigMaps(ns).Delete(ctx, "taken", metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, configMap(ctx, ns, "taken")).WithTimeout(30 * time.Second).Should(And(
			controlledBy(site), HaveField("Data", HaveKeyWithValue("content", "converge"))))
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).WithTimeout(30*time.Second).Should(
			ConsistOf(HaveField("Type", "Ready")), "the conflict condition outlived the conflict")
	}, SpecTimeout(2*time.Minute))

	It("fails, naming the parent, when the parent's kind has no status subresource, instead of taking the status as written", func(ctx SpecContext) {
		logs := &logCapture{}
		mgr := newManager(ns, framework.Options{Logger: logs.logger()})
		// ConfigMaps have no status subresource: a status declared for one
		// can never be written.
		withStatus := declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
			return declarative.State{Status: map[string]string{"phase": "Ready"}}, nil
		})
		d, err := declarative.New(mgr, withStatus, declarative.Options{ChildKinds: []object.Object{&corev1.Secret{}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "statusless", framework.ControllerOptions{}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		createConfigMap(ctx, ns, "parent", map[string]string{"a": "b"})
		Eventually(ctx, loggedErrors(logs, "status subresource", "ConfigMap "+ns+"/parent")).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
	}, SpecTimeout(2*time.Minute))

	It("finishes finalizing a deleted parent when the CRD of one of its child kinds was removed, instead of leaving it Terminating", func(ctx SpecContext) {
		crds := dyn.Resource(crdGVR)
		_, err := crds.Get(ctx, widgetCRD, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Widget CRD must not be installed before this spec: %v", err)
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "widgets.yaml")}})).To(Succeed())
		widgetGone := func(ctx context.Context) func() error {
			return func() error {
				_, err := crds.Get(ctx, widgetCRD, metav1.GetOptions{})
				return err
			}
		}
		// Registered before the manager starts: runs after it stops.
		DeferCleanup(func(ctx SpecContext) {
			err := crds.Delete(ctx, widgetCRD, metav1.DeleteOptions{})
			if !apierrors.IsNotFound(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			Eventually(ctx, widgetGone(ctx)).Should(Satisfy(apierrors.IsNotFound))
		}, NodeTimeout(time.Minute))

		widgets := &unstructured.Unstructured{}
		widgets.SetGroupVersionKind(widget)
		startDeclarative(ctx, ns, pagesWithCleanup{newPageMaps()}, []object.Object{&corev1.ConfigMap{}, widgets}, framework.Options{})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"page": "x"}})
		Eventually(ctx, func() ([]string, error) {
			s, err := getSite(ctx, ns, site.Name)
			if err != nil {
				return nil, err
			}
			return s.Finalizers, nil
		}).WithTimeout(30 * time.Second).Should(ContainElement(siteFinalizer))

		By("removing the Widget CRD, then deleting the parent")
		Expect(crds.Delete(ctx, widgetCRD, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, widgetGone(ctx)).WithTimeout(30 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, site.Name)).WithTimeout(30*time.Second).Should(BeTrue(), "the parent is stuck Terminating")
	}, SpecTimeout(3*time.Minute))
})

// pagesWithCleanup is pageMaps with a Finalizer that does nothing, so that
// converge adds its finalizer to every parent.
type pagesWithCleanup struct{ pageMaps }

func (pagesWithCleanup) Finalize(context.Context, *v1alpha1.StaticSite) error { return nil }
