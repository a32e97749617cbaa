package e2e_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// widget is the kind of testdata/widgets.yaml.
	widget    = schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Widget"}
	widgetGVR = widget.GroupVersion().WithResource("widgets")
)

const widgetCRD = "widgets.e2e.converge.dev"

var _ = Describe("custom resources", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("fails Start with an error naming the kind when its CRD is not installed", func(ctx SpecContext) {
		ghost := schema.GroupVersionKind{Group: "nope.example.com", Version: "v1", Kind: "Ghost"}
		const syncTimeout = 3 * time.Second
		mgr := newManager(ns, framework.Options{Cache: informers.Options{SyncTimeout: syncTimeout}})
		calls := newRecorder()
		Expect(framework.NewBuilder[*unstructured.Unstructured](mgr, "ghosts",
			framework.ControllerOptions{Selection: informers.Selection{Kind: ghost}}).
			CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				calls.record(req)
				return reconcile.Result{}, nil
			}))).To(Succeed())

		started := time.Now()
		run := runManager(ctx, mgr)
		Eventually(ctx, run.done).WithTimeout(syncTimeout+10*time.Second).Should(BeClosed(), "Start hangs on a kind that does not exist")
		err := run.err
		took := time.Since(started)
		GinkgoWriter.Printf("Start returned after %v: %v\n", took.Round(time.Millisecond), err)

		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("Ghost"))
		Expect(err.Error()).To(Or(ContainSubstring("CRD"), ContainSubstring("resource not found")))
		var syncErr *informers.SyncError
		Expect(errors.As(err, &syncErr)).To(BeTrue(), "the error is not an *informers.SyncError")
		Expect(syncErr.Kind).To(Equal(ghost))
		Expect(took).To(BeNumerically(">=", syncTimeout), "Start gave up before the sync timeout")
		Expect(calls.keys()).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("starts reconciling a kind once its CRD is installed, without a restart", func(ctx SpecContext) {
		crds := dyn.Resource(crdGVR)
		_, err := crds.Get(ctx, widgetCRD, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Widget CRD must not be installed before this spec: %v", err)
		// Remove the CRD afterwards (after the manager stops: cleanups run in
		// reverse order), so the spec can run again on the same control plane.
		DeferCleanup(func(ctx SpecContext) {
			err := crds.Delete(ctx, widgetCRD, metav1.DeleteOptions{})
			if !apierrors.IsNotFound(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			Eventually(ctx, func() error {
				_, err := crds.Get(ctx, widgetCRD, metav1.GetOptions{})
				return err
			}).Should(Satisfy(apierrors.IsNotFound))
		}, NodeTimeout(time.Minute))

		// A negative SyncTimeout: wait for the kind as long as it takes.
		mgr := newManager(ns, framework.Options{Cache: informers.Options{SyncTimeout: -1}})
		var (
			mu    sync.Mutex
			sizes = map[reconcile.Request]int64{} // spec.size as reconciled; mu guards it
		)
		Expect(framework.NewBuilder[*unstructured.Unstructured](mgr, "widgets",
			framework.ControllerOptions{Selection: informers.Selection{Kind: widget}}).
			Complete(reconcile.ObjectFunc[*unstructured.Unstructured](func(_ context.Context, w *unstructured.Unstructured) (reconcile.Result, error) {
				size, _, err := unstructured.NestedInt64(w.Object, "spec", "size")
				mu.Lock()
				defer mu.Unlock()
				sizes[key(w.GetNamespace(), w.GetName())] = size
				return reconcile.Result{}, err
			}))).To(Succeed())
		run := startManager(ctx, mgr)

		By("waiting, not failing, while the kind does not exist")
		Eventually(ctx, mgr.Cache().Health).Should(MatchError(ContainSubstring("resource not found")))
		Expect(run.done).NotTo(BeClosed(), "Start gave up on a kind it was told to wait for")

		By("installing the CRD and creating a Widget")
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "widgets.yaml")}})).To(Succeed())
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(widget)
		w.SetNamespace(ns)
		w.SetName("first")
		Expect(unstructured.SetNestedField(w.Object, int64(3), "spec", "size")).To(Succeed())
		_, err = dyn.Resource(widgetGVR).Namespace(ns).Create(ctx, w, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("reconciling the Widget")
		reconciledSize := func() int64 {
			mu.Lock()
			defer mu.Unlock()
			return sizes[key(ns, "first")]
		}
		// The reflector retries with a jittered backoff that has grown while
		// the kind was missing (up to several seconds by now).
		Eventually(ctx, reconciledSize).WithTimeout(45 * time.Second).Should(BeEquivalentTo(3))
		Expect(mgr.Cache().Health()).To(Succeed())
	}, SpecTimeout(2*time.Minute))
})
