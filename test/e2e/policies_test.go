package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/object"
)

// knob is the kind of testdata/knobs.yaml, which only the optional-kind
// spec installs.
var knob = schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Knob"}

const knobCRD = "knobs.e2e.converge.dev"

// startPolicySites runs a manager with a StaticSite controller declaring
// what desired returns, configured by opts.
func startPolicySites(ctx context.Context, ns string, desired declarative.Func[*v1alpha1.StaticSite], opts declarative.Options) *runningManager {
	GinkgoHelper()
	mgr := newManager(ns, framework.Options{})
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, desired, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "policies", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	return startManager(ctx, mgr)
}

// migrationJob is Job name running image, completed by completeJob.
func migrationJob(name, image string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{
		BackoffLimit: new(int32(0)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: image}}}},
	}}
}

func namedConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// imageOf returns the image label of site, "busybox:1" by default.
func imageOf(site *v1alpha1.StaticSite) string {
	if img := site.Labels["image"]; img != "" {
		return strings.ReplaceAll(img, "_", ":")
	}
	return "busybox:1"
}

// jobOf returns Job ns/name, or nil when there is none.
func jobOf(ctx context.Context, ns, name string) func() (*batchv1.Job, error) {
	return func() (*batchv1.Job, error) {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return j, err
	}
}

// knobDesired declares, for a StaticSite S, ConfigMap S-config and, when
// its label knob is "yes", Knob S-dial and ConfigMap S-after After it;
// when it is "no", the same with the Knob left out by IncludeWhen.
func knobDesired(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	children := []any{declarative.NewChild(namedConfigMap(site.Name + "-config"))}
	if want := site.Labels["knob"]; want != "" {
		k := &unstructured.Unstructured{}
		k.SetGroupVersionKind(knob)
		k.SetName(site.Name + "-dial")
		children = append(children, declarative.NewChild(k).IncludeWhen(want == "yes"), declarative.NewChild(namedConfigMap(site.Name+"-after")).After(k))
	}
	return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
}

// deleteKnobCRD deletes the Knob CRD, if there is one, and waits until it
// is gone.
func deleteKnobCRD(ctx context.Context) {
	GinkgoHelper()
	crds := dyn.Resource(crdGVR)
	if err := crds.Delete(ctx, knobCRD, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(ctx, func() error { _, err := crds.Get(ctx, knobCRD, metav1.GetOptions{}); return err }).
		WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound))
}

var _ = Describe("declarative child policies", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("converges a parent beside one whose child waits for a CRD not installed, and goes on once it is installed, without a restart", func(ctx SpecContext) {
		crds := dyn.Resource(crdGVR)
		_, err := crds.Get(ctx, knobCRD, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Knob CRD must not be installed before this spec: %v", err)
		// Removed after the manager stopped (cleanups run in reverse order),
		// so the spec can run again on the same control plane.
		DeferCleanup(deleteKnobCRD, NodeTimeout(2*time.Minute))

		example := &unstructured.Unstructured{}
		example.SetGroupVersionKind(knob)
		startPolicySites(ctx, ns, knobDesired, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, example}})
		createSite(ctx, ns, "healthy", anySpec)
		createSiteWithLabels(ctx, ns, "waiting", anySpec, map[string]string{"knob": "yes"})
		createSiteWithLabels(ctx, ns, "leftout", anySpec, map[string]string{"knob": "no"})

		Eventually(ctx, siteReadyCondition(ctx, ns, "healthy")).Should(And(
			readyWith(declarative.ChildrenReadyReason, "all 1 children are ready"), HaveField("Status", metav1.ConditionTrue)))
		// A Knob left out by IncludeWhen is not declared: its kind is never
		// looked up, and what is After it is left out with it.
		Eventually(ctx, siteReadyCondition(ctx, ns, "leftout")).Should(And(
			readyWith(declarative.ChildrenReadyReason, "all 1 children are ready"), HaveField("Status", metav1.ConditionTrue)))
		Eventually(ctx, siteReadyCondition(ctx, ns, "waiting")).Should(And(
			readyWith(declarative.WaitingReason, "Knob waiting-dial waits for CustomResourceDefinition knobs.e2e.converge.dev (kind Knob.e2e.converge.dev is not served) since "),
			HaveField("Status", metav1.ConditionFalse)))
		Eventually(ctx, configMap(ctx, ns, "waiting-config")).ShouldNot(BeNil(), "the waiting parent's other children are applied")
		_, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "waiting-after", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap waiting-after, After the Knob, was applied: %v", err)

		By("installing the CRD")
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "knobs.yaml")}})).To(Succeed())
		// Discovery is asked again with a backoff of up to 30 seconds.
		Eventually(ctx, siteReadyCondition(ctx, ns, "waiting")).WithTimeout(90 * time.Second).Should(And(
			readyWith(declarative.ChildrenReadyReason, "all 3 children are ready"), HaveField("Status", metav1.ConditionTrue)))
		k, err := dyn.Resource(knob.GroupVersion().WithResource("knobs")).Namespace(ns).Get(ctx, "waiting-dial", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(k.GetLabels()).To(HaveKey(declarative.ParentUIDLabel))
		Expect(configMap(ctx, ns, "waiting-after")()).NotTo(BeNil())

		By("watching the kind: a Knob deleted by hand is applied again")
		Expect(dyn.Resource(knob.GroupVersion().WithResource("knobs")).Namespace(ns).Delete(ctx, "waiting-dial", metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, func() (types string, err error) {
			k, err := dyn.Resource(knob.GroupVersion().WithResource("knobs")).Namespace(ns).Get(ctx, "waiting-dial", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(k.GetUID()), nil
		}).ShouldNot(Equal(string(k.GetUID())))
	}, SpecTimeout(4*time.Minute))

	It("handles an optional kind whose CRD is deleted while the controller runs as one missing at the start: the manager stays ready, its parents wait for it, and it is watched again once installed", func(ctx SpecContext) {
		_, err := dyn.Resource(crdGVR).Get(ctx, knobCRD, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Knob CRD must not be installed before this spec: %v", err)
		DeferCleanup(deleteKnobCRD, NodeTimeout(2*time.Minute))
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "knobs.yaml")}})).To(Succeed())
		example := &unstructured.Unstructured{}
		example.SetGroupVersionKind(knob)
		mgr := newManager(ns, framework.Options{})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](knobDesired), declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, example}})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "policies", framework.ControllerOptions{}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		createSiteWithLabels(ctx, ns, "dialled", anySpec, map[string]string{"knob": "yes"})
		createSite(ctx, ns, "healthy", anySpec)
		Eventually(ctx, siteReadyCondition(ctx, ns, "dialled")).Should(readyWith(declarative.ChildrenReadyReason, "all 3 children are ready"))

		By("deleting the CRD")
		deleteKnobCRD(ctx)
		Eventually(ctx, siteReadyCondition(ctx, ns, "dialled")).WithTimeout(time.Minute).Should(And(
			readyWith(declarative.WaitingReason, "Knob dialled-dial waits for CustomResourceDefinition knobs.e2e.converge.dev (kind Knob.e2e.converge.dev is not served) since "),
			HaveField("Status", metav1.ConditionFalse)))
		Eventually(ctx, mgr.Cache().Health).WithTimeout(time.Minute).Should(Succeed(), "the manager is ready again: the Knobs' informer stopped")
		Expect(configMap(ctx, ns, "dialled-after")()).NotTo(BeNil(), "ConfigMap dialled-after, After the Knob, is left as it is")
		Expect(siteReadyCondition(ctx, ns, "healthy")()).To(readyWith(declarative.ChildrenReadyReason, "all 1 children are ready"))

		By("installing the CRD again")
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "knobs.yaml")}})).To(Succeed())
		Eventually(ctx, siteReadyCondition(ctx, ns, "dialled")).WithTimeout(90 * time.Second).Should(And(
			readyWith(declarative.ChildrenReadyReason, "all 3 children are ready"), HaveField("Status", metav1.ConditionTrue)))
		_, err = dyn.Resource(knob.GroupVersion().WithResource("knobs")).Namespace(ns).Get(ctx, "dialled-dial", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the Knob is applied again")
		Expect(mgr.Cache().Health()).To(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("puts the API server's cause in the Ready condition when a Job's template changes, and replaces the Job declared ReplaceWhenImmutable in its place in the order", func(ctx SpecContext) {
		startPolicySites(ctx, ns, func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			job := declarative.NewChild(migrationJob(site.Name+"-migrate", imageOf(site)))
			if site.Labels["replace"] == "yes" {
				job.ReplaceWhenImmutable()
			}
			return declarative.State{Children: []any{
				job, declarative.NewChild(namedConfigMap(site.Name + "-after")).After(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-migrate"}}),
			}, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}}})
		createSite(ctx, ns, "plain", anySpec)
		createSiteWithLabels(ctx, ns, "replaced", anySpec, map[string]string{"replace": "yes"})
		for _, site := range []string{"plain", "replaced"} {
			Eventually(ctx, siteReadyCondition(ctx, ns, site)).Should(readyWith(declarative.WaitingReason, "ConfigMap "+site+"-after waits for Job "+site+"-migrate (Complete)"))
			completeJob(ctx, ns, site+"-migrate")
			Eventually(ctx, siteReadyCondition(ctx, ns, site)).Should(readyWith(declarative.ChildrenReadyReason, "all 2 children are ready"))
		}
		oldPlain, err := jobOf(ctx, ns, "plain-migrate")()
		Expect(err).NotTo(HaveOccurred())
		oldJob, err := jobOf(ctx, ns, "replaced-migrate")()
		Expect(err).NotTo(HaveOccurred())
		after, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "replaced-after", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("changing the image of both Jobs")
		patchSite(ctx, ns, "plain", `{"metadata":{"labels":{"image":"busybox_2"}}}`)
		patchSite(ctx, ns, "replaced", `{"metadata":{"labels":{"image":"busybox_2"}}}`)

		// Without the policy: the apply fails, and the condition says why
		// as the API server does.
		Eventually(ctx, siteReadyCondition(ctx, ns, "plain")).Should(And(
			readyWith(declarative.ChildFailedReason, "Job plain-migrate could not be applied: the API server answered 422 Invalid: spec.template: "),
			HaveField("Message", ContainSubstring("field is immutable")),
			HaveField("Message", Not(ContainSubstring(`"containers"`)))), // the quoted template left out
			"the Ready condition of a Job whose template cannot change")
		Expect(jobOf(ctx, ns, "plain-migrate")()).To(HaveField("UID", oldPlain.UID))

		// With it: the Job is deleted and created again with the new image;
		// what is After it waits for the new one, and is not deleted.
		Eventually(ctx, jobOf(ctx, ns, "replaced-migrate")).WithTimeout(time.Minute).Should(And(
			Not(BeNil()), Not(HaveField("UID", oldJob.UID)),
			HaveField("Spec.Template.Spec.Containers", ConsistOf(HaveField("Image", "busybox:2")))))
		Eventually(ctx, siteReadyCondition(ctx, ns, "replaced")).Should(readyWith(declarative.WaitingReason, "ConfigMap replaced-after waits for Job replaced-migrate (Complete)"))
		completeJob(ctx, ns, "replaced-migrate")
		Eventually(ctx, siteReadyCondition(ctx, ns, "replaced")).Should(readyWith(declarative.ChildrenReadyReason, "all 2 children are ready"))
		Expect(kube.CoreV1().ConfigMaps(ns).Get(ctx, "replaced-after", metav1.GetOptions{})).To(HaveField("UID", after.UID),
			"ConfigMap replaced-after, After the Job replaced, was deleted")

		By("never replacing a Job of that name made by hand")
		foreign, err := kube.BatchV1().Jobs(ns).Create(ctx, migrationJob("foreign-migrate", "busybox:1"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		createSiteWithLabels(ctx, ns, "foreign", anySpec, map[string]string{"replace": "yes", "image": "busybox_2"})
		Eventually(ctx, siteReadyCondition(ctx, ns, "foreign")).Should(readyWith(declarative.ChildFailedReason,
			"Job foreign-migrate could not be applied: Job "+ns+"/foreign-migrate already exists and is not managed by StaticSite "+ns+"/foreign"))
		Expect(jobOf(ctx, ns, "foreign-migrate")()).To(And(HaveField("UID", foreign.UID), HaveField("DeletionTimestamp", BeNil())))
	}, SpecTimeout(3*time.Minute))

	It("does not create a run-once Job again once its ttlSecondsAfterFinished deleted it, after a restart too, and does when its content changes", func(ctx SpecContext) {
		desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			j := migrationJob("migrate", imageOf(site))
			j.Spec.TTLSecondsAfterFinished = new(int32(1))
			return declarative.State{Children: []any{
				declarative.NewChild(j).RunOnce(), declarative.NewChild(namedConfigMap("after")).After(j),
			}, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}
		opts := declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}}}
		run := startPolicySites(ctx, ns, desired, opts)
		createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete)"))
		first, err := jobOf(ctx, ns, "migrate")()
		Expect(err).NotTo(HaveOccurred())
		completeJob(ctx, ns, "migrate")

		By("Kubernetes deleting the Job once it finished")
		Eventually(ctx, jobOf(ctx, ns, "migrate")).WithTimeout(time.Minute).Should(BeNil(), "the TTL-after-finished controller deletes Job migrate")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildrenReadyReason, "all 2 children are ready"))
		site, err := getSite(ctx, ns, "site")
		Expect(err).NotTo(HaveOccurred())
		Expect(site.Annotations).To(HaveKeyWithValue(declarative.RanAnnotation, HavePrefix(string(site.UID)+" ")))
		patchSite(ctx, ns, "site", `{"metadata":{"labels":{"touched":"1"}}}`) // one more reconcile
		Consistently(ctx, jobOf(ctx, ns, "migrate")).WithTimeout(3*time.Second).Should(BeNil(), "Job migrate was created again")

		By("restarting the manager")
		run.stop(ctx)
		startPolicySites(ctx, ns, desired, opts)
		Consistently(ctx, jobOf(ctx, ns, "migrate")).WithTimeout(3*time.Second).Should(BeNil(), "Job migrate was created again after a restart")
		Expect(siteReadyCondition(ctx, ns, "site")()).To(readyWith(declarative.ChildrenReadyReason, "all 2 children are ready"))

		By("changing the Job's content")
		patchSite(ctx, ns, "site", `{"metadata":{"labels":{"image":"busybox_2"}}}`)
		Eventually(ctx, jobOf(ctx, ns, "migrate")).Should(And(Not(BeNil()), Not(HaveField("UID", first.UID)),
			HaveField("Spec.Template.Spec.Containers", ConsistOf(HaveField("Image", "busybox:2")))))
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete)"))
	}, SpecTimeout(3*time.Minute))

	It("replaces a finished run-once Job declared ReplaceWhenImmutable when its content changes before its TTL deleted it", func(ctx SpecContext) {
		desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			j := migrationJob("migrate", imageOf(site))
			j.Spec.TTLSecondsAfterFinished = new(int32(3600))
			return declarative.State{Children: []any{
				declarative.NewChild(j).RunOnce().ReplaceWhenImmutable(), declarative.NewChild(namedConfigMap("after")).After(j),
			}, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}
		startPolicySites(ctx, ns, desired, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}}})
		createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, jobOf(ctx, ns, "migrate")).ShouldNot(BeNil())
		first, err := jobOf(ctx, ns, "migrate")()
		Expect(err).NotTo(HaveOccurred())
		completeJob(ctx, ns, "migrate")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildrenReadyReason, "all 2 children are ready"))

		patchSite(ctx, ns, "site", `{"metadata":{"labels":{"image":"busybox_2"}}}`)
		Eventually(ctx, jobOf(ctx, ns, "migrate")).Should(And(Not(BeNil()), Not(HaveField("UID", first.UID)),
			HaveField("Spec.Template.Spec.Containers", ConsistOf(HaveField("Image", "busybox:2")))), "the finished Job replaced by one of the new content")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete) since "))
	}, SpecTimeout(3*time.Minute))

	It("creates a Job with a ttlSecondsAfterFinished and without RunOnce again each time Kubernetes deletes it, and says so once with a Warning Event and in the Ready condition", func(ctx SpecContext) {
		desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			j := migrationJob("migrate", imageOf(site))
			j.Spec.TTLSecondsAfterFinished = new(int32(1))
			return declarative.State{Children: []any{
				declarative.NewChild(j), declarative.NewChild(namedConfigMap("after")).After(j),
			}, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}
		startPolicySites(ctx, ns, desired, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}}})
		createSite(ctx, ns, "site", anySpec)
		const note = "it runs again each time its ttlSecondsAfterFinished deletes it: declare it RunOnce to run it once"
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete; "+note+") since "))
		for run := range 2 {
			By(fmt.Sprintf("run %d: the Job finishing, and Kubernetes deleting it", run+1))
			job, err := jobOf(ctx, ns, "migrate")()
			Expect(err).NotTo(HaveOccurred())
			Expect(job).NotTo(BeNil())
			completeJob(ctx, ns, "migrate")
			Eventually(ctx, jobOf(ctx, ns, "migrate")).WithTimeout(time.Minute).Should(Or(BeNil(), Not(HaveField("UID", job.UID))),
				"the TTL-after-finished controller deletes Job migrate")
			Eventually(ctx, jobOf(ctx, ns, "migrate")).Should(And(Not(BeNil()), Not(HaveField("UID", job.UID))), "converge creates Job migrate again")
		}
		Eventually(ctx, warningEvents(ctx, ns, "site", declarative.RerunAfterTTLReason)).Should(ConsistOf(And(HaveField("Series", BeNil()),
			HaveField("Note", "Job migrate sets ttlSecondsAfterFinished and is not declared RunOnce: each time the TTL deletes it once it finished, converge creates it again and it runs again; declare it with RunOnce() to run it once per content, or drop the TTL"))),
			"one Warning Event, whatever the reruns")
		Expect(siteReadyCondition(ctx, ns, "site")()).To(readyWith(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete; "+note+")"))
	}, SpecTimeout(3*time.Minute))

	It("keeps a retained PersistentVolumeClaim when its parent is deleted, with background or foreground propagation, with no owner reference and none of converge's labels", func(ctx SpecContext) {
		startPolicySites(ctx, ns, func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-data"}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
			return declarative.State{Children: []any{declarative.NewChild(pvc).Retain(), declarative.NewChild(namedConfigMap(site.Name + "-config"))},
				Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
		}, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}}})
		propagation := map[string]metav1.DeletionPropagation{"background": metav1.DeletePropagationBackground, "foreground": metav1.DeletePropagationForeground}
		for name := range propagation {
			createSite(ctx, ns, name, anySpec)
			// No provisioner binds the claim: it stays Pending.
			Eventually(ctx, siteReadyCondition(ctx, ns, name)).Should(readyWith(declarative.NotReadyReason, "PersistentVolumeClaim "+name+"-data is not ready yet (Bound)"))
			Eventually(ctx, configMap(ctx, ns, name+"-config")).ShouldNot(BeNil())
		}
		for name, policy := range propagation {
			Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})).To(Succeed())
		}
		for name := range propagation {
			Eventually(ctx, siteGone(ctx, ns, name)).WithTimeout(time.Minute).Should(BeTrue(), "StaticSite %s is deleted", name)
			Eventually(ctx, func() bool {
				_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-config", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(time.Minute).Should(BeTrue(), "the garbage collector deletes ConfigMap %s-config", name)
			pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name+"-data", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "PersistentVolumeClaim %s-data", name)
			Expect(pvc.DeletionTimestamp).To(BeNil(), "PersistentVolumeClaim %s-data is being deleted", name)
			Expect(pvc.OwnerReferences).To(BeEmpty())
			Expect(pvc.Labels).NotTo(Or(HaveKey(declarative.ParentUIDLabel), HaveKey(declarative.ManagerLabel)))
			Expect(pvc.Annotations).NotTo(Or(HaveKey(declarative.ParentAnnotation), HaveKey(declarative.AppliedAnnotation), HaveKey(declarative.RetainAnnotation)))
		}
	}, SpecTimeout(3*time.Minute))
})
