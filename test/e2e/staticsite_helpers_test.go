package e2e_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
)

// The StaticSite kind of examples/staticsite, whose CRD the suite installs.
var siteGVR = v1alpha1.GroupVersion.WithResource("staticsites")

const (
	// siteFieldManager is the declarative reconciler's default field manager
	// for StaticSite parents.
	siteFieldManager = "converge-staticsite"
	// siteFinalizer is its default finalizer.
	siteFinalizer = "converge.dev/converge-staticsite"
)

// sites is the StaticSite declarative reconciler with a count of the
// reconciles of each site (each calls Desired once, unless the site is being
// deleted).
type sites struct {
	desired *recorder
}

var _ declarative.Reconciler[*v1alpha1.StaticSite] = (*sites)(nil)

func newSites() *sites { return &sites{desired: newRecorder()} }

func (s *sites) Desired(ctx context.Context, obj *v1alpha1.StaticSite) (declarative.State, error) {
	s.desired.record(key(obj.Namespace, obj.Name))
	logr.FromContextOrDiscard(ctx).Info("desired", "uid", obj.UID, "resourceVersion", obj.ResourceVersion, "generation", obj.Generation, "finalizers", obj.Finalizers)
	return site.Desired(ctx, obj)
}

// finalizingSites is sites with cleanup: it implements declarative.Finalizer
// and counts the calls.
type finalizingSites struct {
	*sites
	finalized *recorder
}

var _ declarative.Finalizer[*v1alpha1.StaticSite] = finalizingSites{}

func (f finalizingSites) Finalize(ctx context.Context, site *v1alpha1.StaticSite) error {
	f.finalized.record(key(site.Namespace, site.Name))
	logr.FromContextOrDiscard(ctx).Info("finalize", "uid", site.UID, "resourceVersion", site.ResourceVersion, "finalizers", site.Finalizers, "deleting", site.DeletionTimestamp)
	return nil
}

// startSites starts a manager for namespace ns running r as the StaticSite
// controller, the way examples/staticsite's setup builds it.
func startSites(ctx context.Context, ns string, r declarative.Reconciler[*v1alpha1.StaticSite], opts framework.Options) (*framework.Manager, *runningManager) {
	GinkgoHelper()
	mgr := newManager(ns, opts)
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, r, declarative.Options{
		ChildKinds: site.Children(),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	return mgr, startManager(ctx, mgr)
}

// createSite creates the StaticSite ns/name with spec.
func createSite(ctx context.Context, ns, name string, spec v1alpha1.StaticSiteSpec) *v1alpha1.StaticSite {
	GinkgoHelper()
	return createSiteWithAnnotations(ctx, ns, name, spec, nil)
}

// createSiteWithAnnotations creates the StaticSite ns/name with spec and
// annotations.
func createSiteWithAnnotations(ctx context.Context, ns, name string, spec v1alpha1.StaticSiteSpec, annotations map[string]string) *v1alpha1.StaticSite {
	GinkgoHelper()
	site := &v1alpha1.StaticSite{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "StaticSite"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       spec,
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(site)
	Expect(err).NotTo(HaveOccurred())
	u, err := dyn.Resource(siteGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create StaticSite %s/%s", ns, name)
	out := &v1alpha1.StaticSite{}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)).To(Succeed())
	return out
}

// getSite reads the StaticSite ns/name from the API server.
func getSite(ctx context.Context, ns, name string) (*v1alpha1.StaticSite, error) {
	u, err := dyn.Resource(siteGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.StaticSite{}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// patchSite applies a JSON merge patch to the StaticSite ns/name and returns
// its new generation.
func patchSite(ctx context.Context, ns, name, patch string) int64 {
	GinkgoHelper()
	u, err := dyn.Resource(siteGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred(), "patch StaticSite %s/%s with %s", ns, name, patch)
	return u.GetGeneration()
}

// siteReady returns a function that fails until the StaticSite ns/name
// reports Ready for its current generation, for Eventually.
func siteReady(ctx context.Context, ns, name string) func() error {
	return func() error {
		site, err := getSite(ctx, ns, name)
		if err != nil {
			return err
		}
		if site.Status.ObservedGeneration != site.Generation {
			return fmt.Errorf("status.observedGeneration %d, generation %d", site.Status.ObservedGeneration, site.Generation)
		}
		ready := meta.FindStatusCondition(site.Status.Conditions, "Ready")
		switch {
		case ready == nil:
			return errors.New("no Ready condition")
		case ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != site.Generation:
			return fmt.Errorf("Ready is %s for generation %d, generation %d", ready.Status, ready.ObservedGeneration, site.Generation)
		}
		return nil
	}
}

// siteChildren returns the children of the StaticSite ns/name that exist,
// read from the API server (managedFields included).
func siteChildren(ctx context.Context, ns, name string) (cm *corev1.ConfigMap, deploy *appsv1.Deployment, svc *corev1.Service, pdb *policyv1.PodDisruptionBudget) {
	GinkgoHelper()
	get := func(err error) {
		if !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
	var err error
	if cm, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		cm = nil
		get(err)
	}
	if deploy, err = kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		deploy = nil
		get(err)
	}
	if svc, err = kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		svc = nil
		get(err)
	}
	if pdb, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		pdb = nil
		get(err)
	}
	return cm, deploy, svc, pdb
}

// configMapData returns a function reporting the data of ConfigMap ns/name.
func configMapData(ctx context.Context, ns, name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return cm.Data, err
	}
}

// deploymentReplicas returns a function reporting spec.replicas of
// Deployment ns/name (the API server defaults it to 1).
func deploymentReplicas(ctx context.Context, ns, name string) func() (int32, error) {
	return func() (int32, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return *d.Spec.Replicas, nil
	}
}

// pdbGone returns a function reporting whether PodDisruptionBudget ns/name
// is absent, for Eventually.
func pdbGone(ctx context.Context, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		_, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// childrenLeft returns a function reporting which of the ConfigMap,
// Deployment, Service and PodDisruptionBudget ns/name still exist.
func childrenLeft(ctx context.Context, ns, name string) func() []string {
	return func() []string {
		cm, deploy, svc, pdb := siteChildren(ctx, ns, name)
		var left []string
		if cm != nil {
			left = append(left, "ConfigMap")
		}
		if deploy != nil {
			left = append(left, "Deployment")
		}
		if svc != nil {
			left = append(left, "Service")
		}
		if pdb != nil {
			left = append(left, "PodDisruptionBudget")
		}
		return left
	}
}

// controlledBy matches objects whose only owner reference is the
// controller reference to site.
func controlledBy(site *v1alpha1.StaticSite) OmegaMatcher {
	return HaveField("ObjectMeta.OwnerReferences", ConsistOf(And(
		HaveField("APIVersion", v1alpha1.GroupVersion.String()),
		HaveField("Kind", "StaticSite"),
		HaveField("Name", site.Name),
		HaveField("UID", site.UID),
		HaveField("Controller", HaveValue(BeTrue())),
	)))
}

// appliedBy matches objects with a managedFields entry of an apply by manager.
func appliedBy(manager string) OmegaMatcher {
	return HaveField("ObjectMeta.ManagedFields", ContainElement(And(
		HaveField("Manager", manager),
		HaveField("Operation", metav1.ManagedFieldsOperationApply),
	)))
}
