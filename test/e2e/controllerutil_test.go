package e2e_test

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/framework/envtest"
)

var _ = Describe("controllerutil", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })
	// started runs a manager with no controllers for the spec: its client
	// is what the helpers write through.
	started := func(ctx SpecContext) *framework.Manager {
		mgr := newManager(ns, framework.Options{})
		startManager(ctx, mgr)
		return mgr
	}

	It("CreateOrUpdate creates, writes nothing when nothing changes, updates, and fails on a concurrent change", func(ctx SpecContext) {
		mgr := started(ctx)
		c := mgr.Client()
		value := "1"
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cou"}}
		mutate := func() error {
			cm.Data = map[string]string{"v": value}
			return nil
		}

		Expect(controllerutil.CreateOrUpdate(ctx, c, cm, mutate)).To(Equal(controllerutil.Created))
		created := cm.ResourceVersion

		By("writing nothing when mutate leaves the object as it is")
		Expect(controllerutil.CreateOrUpdate(ctx, c, cm, mutate)).To(Equal(controllerutil.Unchanged))
		live, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cou", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.ResourceVersion).To(Equal(created), "an unchanged object was written")

		By("updating when mutate changes it")
		value = "2"
		Expect(controllerutil.CreateOrUpdate(ctx, c, cm, mutate)).To(Equal(controllerutil.Updated))
		live, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "cou", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Data).To(HaveKeyWithValue("v", "2"))

		By("refusing to overwrite a change made between the read and the write")
		value = "3"
		_, err = controllerutil.CreateOrUpdate(ctx, c, cm, func() error {
			cm.Data = map[string]string{"v": value}
			// Someone else writes after our read.
			other := live.DeepCopy()
			other.Data["v"] = "theirs"
			_, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, other, metav1.UpdateOptions{})
			return err
		})
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "err = %v, want a conflict", err)
		live, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "cou", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Data).To(HaveKeyWithValue("v", "theirs"))
	}, SpecTimeout(time.Minute))

	It("CreateOrPatch sends only what mutate changed, so fields set by others survive, and refuses to rename", func(ctx SpecContext) {
		mgr := started(ctx)
		c := mgr.Client()
		createConfigMap(ctx, ns, "cop", map[string]string{"ours": "1"})
		// Another writer adds a label and a key of its own.
		live, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cop", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		live.Labels = map[string]string{"theirs": "yes"}
		live.Data["theirs"] = "x"
		_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, live, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())

		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cop"}}
		Expect(controllerutil.CreateOrPatch(ctx, c, cm, func() error {
			cm.Data["ours"] = "2"
			return nil
		})).To(Equal(controllerutil.Patched))
		live, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "cop", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Data).To(Equal(map[string]string{"ours": "2", "theirs": "x"}))
		Expect(live.Labels).To(HaveKeyWithValue("theirs", "yes"))

		_, err = controllerutil.CreateOrPatch(ctx, c, cm, func() error {
			cm.Name = "elsewhere"
			return nil
		})
		Expect(err).To(MatchError(ContainSubstring("changed the object's name or namespace")))
		_, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "elsewhere", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, SpecTimeout(time.Minute))

	It("CreateOrPatch writes the status of a kind without the status subresource with the rest of the object", func(ctx SpecContext) {
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "gizmos.yaml")}})).To(Succeed())
		gizmo := schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Gizmo"}
		mgr := started(ctx)
		c := mgr.Client()
		newGizmo := func() *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gizmo)
			u.SetNamespace(ns)
			u.SetName("g")
			return u
		}
		obj := newGizmo()
		Expect(controllerutil.CreateOrPatch(ctx, c, obj, func() error {
			return unstructured.SetNestedField(obj.Object, "1", "spec", "size")
		})).To(Equal(controllerutil.Created))

		obj = newGizmo()
		Expect(controllerutil.CreateOrPatch(ctx, c, obj, func() error {
			if err := unstructured.SetNestedField(obj.Object, "2", "spec", "size"); err != nil {
				return err
			}
			return unstructured.SetNestedField(obj.Object, "Ready", "status", "phase")
		})).To(Equal(controllerutil.Patched))
		live, err := dyn.Resource(gizmo.GroupVersion().WithResource("gizmos")).Namespace(ns).Get(ctx, "g", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("size", "2")))
		Expect(live.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("phase", "Ready")))

		By("patching a status-only change")
		obj = newGizmo()
		Expect(controllerutil.CreateOrPatch(ctx, c, obj, func() error {
			return unstructured.SetNestedField(obj.Object, "Done", "status", "phase")
		})).To(Equal(controllerutil.Patched))
		live, err = dyn.Resource(gizmo.GroupVersion().WithResource("gizmos")).Namespace(ns).Get(ctx, "g", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("phase", "Done")))
	}, SpecTimeout(2*time.Minute))

	It("SetControllerReference refuses an object another owner controls, and the refusal leaves it untouched", func(ctx SpecContext) {
		mgr := started(ctx)
		a, b := createConfigMap(ctx, ns, "owner-a", nil), createConfigMap(ctx, ns, "owner-b", nil)
		child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned"}}
		Expect(controllerutil.SetControllerReference(a, child, mgr.Scheme())).To(Succeed())
		Expect(mgr.Client().Create(ctx, child)).To(Succeed())

		var live corev1.Secret
		Expect(mgr.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "owned"}, &live)).To(Succeed())
		err := controllerutil.SetControllerReference(b, &live, mgr.Scheme())
		var owned *controllerutil.AlreadyOwnedError
		Expect(err).To(BeAssignableToTypeOf(owned))
		Expect(err).To(MatchError(ContainSubstring("already controlled by ConfigMap owner-a")))
		Expect(metav1.GetControllerOf(&live).UID).To(Equal(a.UID))
	}, SpecTimeout(time.Minute))
})
