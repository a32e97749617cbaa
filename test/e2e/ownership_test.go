package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

var _ = Describe("declarative children ownership", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })
	configMaps := []object.Object{&corev1.ConfigMap{}}

	It("leaves a hand-made object of a child's name untouched, records a Warning Event naming it, and never prunes it", func(ctx SpecContext) {
		logs := &logCapture{}
		handMade := createConfigMap(ctx, ns, "taken", map[string]string{"content": "by hand"})
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{Logger: logs.logger()})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"taken": "converge", "free": "converge"}})

		Eventually(ctx, conflictEvents(ctx, site)).WithTimeout(30 * time.Second).Should(ContainElement(And(
			HaveField("Action", "Apply"),
			HaveField("ReportingController", siteFieldManager),
			HaveField("Note", ContainSubstring(fmt.Sprintf("ConfigMap %s/taken already exists and is not managed by StaticSite %s/site", ns, ns))),
			HaveField("Related", BeNil()),
		)))
		Eventually(ctx, loggedErrors(logs, "child exists and is not managed by this parent", "ConfigMap "+ns+"/taken")).ShouldNot(BeEmpty())
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).Should(ContainElements(
			HaveField("Type", "Ready"),
			And(
				HaveField("Type", declarative.ChildConflictCondition),
				HaveField("Status", metav1.ConditionTrue),
				HaveField("Reason", declarative.ChildConflictReason),
				HaveField("Message", ContainSubstring(fmt.Sprintf("ConfigMap %s/taken already exists", ns))),
			),
		), "the conflict is not in the parent's status")
		Eventually(ctx, configMapData(ctx, ns, "free")).Should(HaveKeyWithValue("content", "converge"), "the other child was not applied")
		Consistently(ctx, configMap(ctx, ns, "taken")).WithTimeout(2*time.Second).Should(And(
			HaveField("ResourceVersion", handMade.ResourceVersion),
			HaveField("OwnerReferences", BeEmpty()),
			HaveField("Data", Equal(map[string]string{"content": "by hand"})),
		), "the hand-made ConfigMap was written to")

		By("no longer declaring it: it is not the parent's to prune")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"taken":null,"free":"v2"}}}`)
		Eventually(ctx, configMapData(ctx, ns, "free")).Should(HaveKeyWithValue("content", "v2"))
		Consistently(ctx, configMap(ctx, ns, "taken")).WithTimeout(time.Second).Should(HaveField("ResourceVersion", handMade.ResourceVersion))
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).Should(ConsistOf(HaveField("Type", "Ready")), "the conflict condition outlived the conflict")
	}, SpecTimeout(2*time.Minute))

	It("does not write to a hand-made object of a child's name that the cache does not show yet", func(ctx SpecContext) {
		// The ConfigMap informer stops at the hand-made object until
		// released, as a lagging watch would.
		release := make(chan struct{})
		var once sync.Once
		releaseNow := func() { once.Do(func() { close(release) }) }
		hold := func(obj any) (any, error) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "late" {
				<-release
			}
			return obj, nil
		}
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{
			Cache: informers.Options{Transform: hold, ReadYourWritesTimeout: -1},
		})
		DeferCleanup(releaseNow) // registered after the manager's: runs before it stops
		// A first site's child shows the controller running, its cache synced.
		createSite(ctx, ns, "warm", v1alpha1.StaticSiteSpec{Pages: map[string]string{"warm": "x"}})
		Eventually(ctx, configMapData(ctx, ns, "warm")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "x"))
		handMade := createConfigMap(ctx, ns, "late", map[string]string{"content": "by hand"})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"late": "converge"}})

		Eventually(ctx, conflictEvents(ctx, site)).WithTimeout(30 * time.Second).Should(ContainElement(
			HaveField("Note", ContainSubstring(fmt.Sprintf("ConfigMap %s/late already exists and is not managed by StaticSite %s/site", ns, ns)))))
		Consistently(ctx, configMap(ctx, ns, "late")).WithTimeout(time.Second).Should(And(
			HaveField("ResourceVersion", handMade.ResourceVersion),
			HaveField("OwnerReferences", BeEmpty()),
		), "a hand-made object the cache did not show was written to")
		releaseNow()
	}, SpecTimeout(2*time.Minute))

	It("does not write to an object that replaced its child while the cache still shows the child", func(ctx SpecContext) {
		// Once held, the ConfigMap informer stops at the next event of the
		// child until released, as a lagging watch would.
		var held atomic.Bool
		release := make(chan struct{})
		var once sync.Once
		releaseNow := func() { once.Do(func() { close(release) }) }
		hold := func(obj any) (any, error) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "replaced" && held.Load() {
				<-release
			}
			return obj, nil
		}
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{
			Cache: informers.Options{Transform: hold, ReadYourWritesTimeout: -1},
		})
		DeferCleanup(releaseNow) // registered after the manager's: runs before it stops
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"replaced": "v1"}})
		Eventually(ctx, configMap(ctx, ns, "replaced")).WithTimeout(30 * time.Second).Should(controlledBy(site))
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).Should(ContainElement(HaveField("Type", "Ready")))

		By("replacing the child by a hand-made ConfigMap the cache does not see")
		held.Store(true)
		Expect(kube.CoreV1().ConfigMaps(ns).Delete(ctx, "replaced", metav1.DeleteOptions{})).To(Succeed())
		handMade := createConfigMap(ctx, ns, "replaced", map[string]string{"content": "by hand"})

		By("changing the child: converge applies it only to the object it saw")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"replaced":"v2"}}}`)
		Eventually(ctx, conflictEvents(ctx, site)).WithTimeout(30 * time.Second).Should(ContainElement(
			HaveField("Note", ContainSubstring(fmt.Sprintf("ConfigMap %s/replaced already exists and is not managed by StaticSite %s/site", ns, ns)))))
		Consistently(ctx, configMap(ctx, ns, "replaced")).WithTimeout(time.Second).Should(And(
			HaveField("ResourceVersion", handMade.ResourceVersion),
			HaveField("OwnerReferences", BeEmpty()),
		), "the object that replaced the child was written to")
		releaseNow()
	}, SpecTimeout(2*time.Minute))

	It("adopts a hand-made object only when the child is declared with Adopt", func(ctx SpecContext) {
		createConfigMap(ctx, ns, "loose", map[string]string{"content": "by hand", "extra": "kept"})
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"adopt:loose": "converge"}})

		Eventually(ctx, configMap(ctx, ns, "loose")).WithTimeout(30 * time.Second).Should(And(
			controlledBy(site),
			appliedBy(siteFieldManager),
			HaveField("Data", HaveKeyWithValue("content", "converge")),
		))

		By("adopted, it is pruned like any child once no longer declared")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"adopt:loose":null,"other":"x"}}}`)
		Eventually(ctx, func() bool {
			_, err := configMap(ctx, ns, "loose")()
			return apierrors.IsNotFound(err)
		}).WithTimeout(30 * time.Second).Should(BeTrue())
	}, SpecTimeout(2*time.Minute))

	It("never takes a child another parent controls, even with Adopt: the first parent keeps it and is still reconciled", func(ctx SpecContext) {
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{})
		first := createSite(ctx, ns, "first", v1alpha1.StaticSiteSpec{Pages: map[string]string{"shared": "from first"}})
		Eventually(ctx, configMap(ctx, ns, "shared")).WithTimeout(30 * time.Second).Should(And(
			controlledBy(first), HaveField("Data", HaveKeyWithValue("content", "from first"))))

		second := createSite(ctx, ns, "second", v1alpha1.StaticSiteSpec{Pages: map[string]string{"adopt:shared": "from second"}})
		Eventually(ctx, conflictEvents(ctx, second)).WithTimeout(30 * time.Second).Should(ContainElement(
			HaveField("Note", And(
				ContainSubstring(fmt.Sprintf("ConfigMap %s/shared already exists and is not managed by StaticSite %s/second", ns, ns)),
				ContainSubstring(fmt.Sprintf("controlled by StaticSite first (uid %s)", first.UID)),
			))))
		Consistently(ctx, configMap(ctx, ns, "shared")).WithTimeout(2 * time.Second).Should(And(
			controlledBy(first), HaveField("Data", HaveKeyWithValue("content", "from first"))))

		By("changing the first parent: its child follows")
		patchSite(ctx, ns, first.Name, `{"spec":{"pages":{"shared":"first again"}}}`)
		Eventually(ctx, configMapData(ctx, ns, "shared")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "first again"))
		Expect(configMap(ctx, ns, "shared")()).To(controlledBy(first))
	}, SpecTimeout(2*time.Minute))

	It("prunes only what its owner reference proves its own, not a hand-made object carrying its labels", func(ctx SpecContext) {
		pages := newPageMaps()
		startDeclarative(ctx, ns, pages, configMaps, framework.Options{})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"kept": "x"}})
		Eventually(ctx, configMapData(ctx, ns, "kept")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "x"))

		By("copying a child's labels and annotation onto a hand-made ConfigMap")
		stray, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: "stray",
				Labels: map[string]string{
					declarative.ParentUIDLabel: string(site.UID),
					declarative.ManagerLabel:   siteFieldManager,
				},
				Annotations: map[string]string{declarative.ParentAnnotation: ns + "/" + site.Name},
			},
			Data: map[string]string{"content": "by hand"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before := pages.desired.count(key(ns, site.Name))()
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"kept2":"y"}}}`)
		Eventually(ctx, configMapData(ctx, ns, "kept2")).Should(HaveKeyWithValue("content", "y"))
		Expect(pages.desired.count(key(ns, site.Name))()).To(BeNumerically(">", before))
		Consistently(ctx, configMap(ctx, ns, "stray")).WithTimeout(time.Second).Should(HaveField("UID", stray.UID), "a hand-made object was pruned")
	}, SpecTimeout(2*time.Minute))

	It("removes its finalizer when another manager wrote it (a restored backup), leaving others' finalizers, so the parent is not stuck Terminating", func(ctx SpecContext) {
		startDeclarative(ctx, ns, newPageMaps(), configMaps, framework.Options{})
		site := &v1alpha1.StaticSite{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "StaticSite"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restored",
				Finalizers: []string{"example.com/keep", siteFinalizer}},
			Spec: v1alpha1.StaticSiteSpec{Pages: map[string]string{"restored-page": "x"}},
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(site)
		Expect(err).NotTo(HaveOccurred())
		_, err = dyn.Resource(siteGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{FieldManager: "velero"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, configMapData(ctx, ns, "restored-page")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "x"))

		By("deleting it")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, func() ([]string, error) {
			s, err := getSite(ctx, ns, site.Name)
			if err != nil {
				return nil, err
			}
			return s.Finalizers, nil
		}).WithTimeout(30*time.Second).Should(Equal([]string{"example.com/keep"}), "converge's finalizer was not removed")

		By("the other finalizer's owner finishing")
		_, err = dyn.Resource(siteGVR).Namespace(ns).Patch(ctx, site.Name, types.JSONPatchType,
			[]byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"example.com/keep"},{"op":"remove","path":"/metadata/finalizers/0"}]`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, siteGone(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
	}, SpecTimeout(2*time.Minute))

	It("applies no child when the parent is deleted between the cache read and adding its finalizer", func(ctx SpecContext) {
		var deleted atomic.Bool
		r := clusterRoleOf{desired: newRecorder(), before: func(ctx context.Context, site *v1alpha1.StaticSite) {
			if deleted.Load() {
				return
			}
			defer GinkgoRecover()
			// Deleted for good (no finalizer yet) before Desired returns.
			Expect(dyn.Resource(siteGVR).Namespace(site.Namespace).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
			Eventually(ctx, siteGone(ctx, site.Namespace, site.Name)).Should(BeTrue())
			deleted.Store(true)
		}}
		startDeclarative(ctx, ns, r, []object.Object{&rbacv1.ClusterRole{}}, framework.Options{})
		site := createSite(ctx, ns, "site", anySpec)
		DeferCleanup(func(ctx SpecContext) {
			_ = kube.RbacV1().ClusterRoles().Delete(ctx, siteClusterRole(ns, site.Name), metav1.DeleteOptions{})
		})

		Eventually(ctx, deleted.Load).WithTimeout(30 * time.Second).Should(BeTrue())
		Consistently(ctx, clusterRoleGone(ctx, siteClusterRole(ns, site.Name))).WithTimeout(3*time.Second).Should(BeTrue(),
			"a child of a parent that is gone was applied: nothing will ever delete it")
	}, SpecTimeout(2*time.Minute))

	It("deletes on finalize a child it applied that the cache does not show yet", func(ctx SpecContext) {
		// The ClusterRole informer holds back the child until released, as a
		// lagging watch would.
		name := siteClusterRole(ns, "site")
		release := make(chan struct{})
		var once sync.Once
		releaseNow := func() { once.Do(func() { close(release) }) }
		hold := func(obj any) (any, error) {
			if cr, ok := obj.(*rbacv1.ClusterRole); ok && cr.Name == name {
				<-release
			}
			return obj, nil
		}
		r := clusterRoleOf{desired: newRecorder()}
		startDeclarative(ctx, ns, r, []object.Object{&rbacv1.ClusterRole{}}, framework.Options{
			Cache: informers.Options{Transform: hold, ReadYourWritesTimeout: -1},
		})
		DeferCleanup(releaseNow) // registered after the manager's: runs before it stops
		DeferCleanup(func(ctx SpecContext) { _ = kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}) })
		site := createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, clusterRoleGone(ctx, name)).WithTimeout(30*time.Second).Should(BeFalse(), "the child was not applied")
		Eventually(ctx, func() ([]string, error) {
			s, err := getSite(ctx, ns, site.Name)
			if err != nil {
				return nil, err
			}
			return s.Finalizers, nil
		}).Should(ContainElement(siteFinalizer), "a cluster-scoped child needs the finalizer")

		By("deleting the parent while the cache does not show its child")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
		Expect(clusterRoleGone(ctx, name)()).To(BeTrue(), "the finalizer was removed but the child it missed outlives its parent")
		releaseNow()
	}, SpecTimeout(2*time.Minute))

	It("rejects a child outside the cache's namespace, naming the child and both namespaces, and creates nothing", func(ctx SpecContext) {
		elsewhere := newNamespace(ctx)
		logs := &logCapture{}
		r := declarative.Func[*v1alpha1.StaticSite](func(context.Context, *v1alpha1.StaticSite) (declarative.State, error) {
			return declarative.State{Children: []any{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "far"},
			}}}, nil
		})
		startDeclarative(ctx, ns, r, configMaps, framework.Options{Logger: logs.logger()})
		createSite(ctx, ns, "site", anySpec)

		Eventually(ctx, loggedErrors(logs, fmt.Sprintf("ConfigMap %s/far", elsewhere),
			fmt.Sprintf("namespace %q is outside the manager's cache, which holds namespace %q only", elsewhere, ns))).
			WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		Consistently(ctx, func() bool {
			_, err := configMap(ctx, elsewhere, "far")()
			return apierrors.IsNotFound(err)
		}).WithTimeout(time.Second).Should(BeTrue(), "a child the cache cannot see was created")
	}, SpecTimeout(2*time.Minute))

	It("reverts an atomic list (container args) extended or reordered by hand", func(ctx SpecContext) {
		want := []string{"serve", "--port=8080"}
		r := declarative.Func[*v1alpha1.StaticSite](func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			labels := map[string]string{"app": site.Name}
			return declarative.State{Children: []any{&appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: site.Name},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: "web", Image: "registry.k8s.io/pause:3.10", Args: want,
						}}},
					},
				},
			}}}, nil
		})
		startDeclarative(ctx, ns, r, []object.Object{&appsv1.Deployment{}}, framework.Options{})
		site := createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, deploymentArgs(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(Equal(want))

		By("appending an arg")
		editDeployment(ctx, ns, site.Name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--debug")
		})
		Eventually(ctx, deploymentArgs(ctx, ns, site.Name)).WithTimeout(30*time.Second).Should(Equal(want), "an extended list was not reverted")

		By("reordering the args")
		editDeployment(ctx, ns, site.Name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Args = []string{"--port=8080", "serve"}
		})
		Eventually(ctx, deploymentArgs(ctx, ns, site.Name)).WithTimeout(30*time.Second).Should(Equal(want), "a reordered list was not reverted")
	}, SpecTimeout(2*time.Minute))

	It("never writes to cached objects: an unstructured child under concurrent changes (a data race under -race)", func(ctx SpecContext) {
		cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
		example := &unstructured.Unstructured{}
		example.SetGroupVersionKind(cmGVK)
		desired := newRecorder()
		r := declarative.Func[*v1alpha1.StaticSite](func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			desired.record(key(site.Namespace, site.Name))
			u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"content": "x"}}}
			u.SetGroupVersionKind(cmGVK)
			u.SetName(site.Name)
			return declarative.State{Children: []any{u}}, nil
		})
		mgr, _ := startDeclarative(ctx, ns, r, []object.Object{example}, framework.Options{})
		site := createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, configMapData(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "x"))

		By("reading the cached child while another manager changes it and converge reconciles")
		inf, err := informers.ForObject(mgr.Cache(), example, informers.Selection{Kind: cmGVK})
		Expect(err).NotTo(HaveOccurred())
		stop := make(chan struct{})
		read := make(chan int)
		go func() {
			defer GinkgoRecover()
			n := 0
			for {
				select {
				case <-stop:
					read <- n
					return
				default:
				}
				obj, err := inf.Get(ctx, types.NamespacedName{Namespace: ns, Name: site.Name})
				if err == nil {
					for k, v := range obj.Object { // reads the shared map
						_, _ = k, v
					}
					n++
				}
				time.Sleep(time.Millisecond) // pacing, so the loop does not take a whole core
			}
		}()
		before := desired.count(key(ns, site.Name))()
		for i := range 30 {
			_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, site.Name, types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"labels":{"touched":"t%d"}}}`, i), metav1.PatchOptions{FieldManager: "someone-else"})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(ctx, desired.count(key(ns, site.Name))).Should(BeNumerically(">=", before+3), "changes to the child did not reconcile its parent")
		close(stop)
		Eventually(ctx, read).Should(Receive(BeNumerically(">", 0)))
		Expect(configMapData(ctx, ns, site.Name)()).To(HaveKeyWithValue("content", "x"))
	}, SpecTimeout(2*time.Minute))

	It("reports a typed nil child as an error naming its index and type", func(ctx SpecContext) {
		logs := &logCapture{}
		r := declarative.Func[*v1alpha1.StaticSite](func(context.Context, *v1alpha1.StaticSite) (declarative.State, error) {
			var missing *corev1.ConfigMap
			return declarative.State{Children: []any{missing}}, nil
		})
		startDeclarative(ctx, ns, r, configMaps, framework.Options{Logger: logs.logger()})
		createSite(ctx, ns, "site", anySpec)
		Eventually(ctx, loggedErrors(logs, "child 0 (*v1.ConfigMap): nil pointer")).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		Expect(loggedErrors(logs, "panic")()).To(BeEmpty())
	}, SpecTimeout(time.Minute))
})
