package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// graphDesired declares, for a StaticSite: ConfigMap config; Job migrate
// After it; Deployment web (no replicas: kube-controller-manager makes it
// Available without nodes) After the Job; Service web After the
// Deployment; and, while spec.minAvailable is set, ConfigMap extra. A
// parent labelled cycle=yes declares config After migrate too.
func graphDesired(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	labels := map[string]string{"app": site.Name}
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config"}, Data: map[string]string{"k": "v"}}
	migrate := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Spec: batchv1.JobSpec{
		BackoffLimit: new(int32(0)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "busybox"}}}},
	}}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: new(int32(0)),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
	}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80}},
	}}
	cfg := declarative.NewChild(config)
	if site.Labels["cycle"] == "yes" {
		cfg.After(migrate)
	}
	return declarative.State{
		Children: []any{
			cfg,
			declarative.NewChild(migrate).After(config),
			declarative.NewChild(web).After(migrate),
			declarative.NewChild(svc).After(web),
			declarative.NewChild(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra"}}).IncludeWhen(site.Spec.MinAvailable != nil),
		},
		Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation},
	}, nil
}

// startGraphSites runs a manager with the graphDesired controller.
func startGraphSites(ctx context.Context, ns string) *runningManager {
	GinkgoHelper()
	mgr := newManager(ns, framework.Options{})
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](graphDesired), declarative.Options{
		ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}, &appsv1.Deployment{}, &corev1.Service{}},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "graph", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	return startManager(ctx, mgr)
}

// siteReadyCondition returns the Ready condition of StaticSite ns/name.
func siteReadyCondition(ctx context.Context, ns, name string) func() (*metav1.Condition, error) {
	return func() (*metav1.Condition, error) {
		site, err := getSite(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		c := meta.FindStatusCondition(site.Status.Conditions, declarative.ReadyCondition)
		if c != nil && c.ObservedGeneration != site.Generation {
			return nil, nil // not yet for this generation
		}
		return c, nil
	}
}

func readyWith(reason, message string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Reason", reason), HaveField("Message", ContainSubstring(message)))
}

// completeJob writes the status of Job ns/name as the Job controller does
// once its pod succeeded (the suite's kube-controller-manager runs no Job
// controller).
func completeJob(ctx context.Context, ns, name string) {
	GinkgoHelper()
	j, err := kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
	}}
	_, err = kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// setDeploymentAvailable writes the Available condition of Deployment
// ns/name, True or False, as the Deployment controller would.
func setDeploymentAvailable(ctx context.Context, ns, name string, available bool) {
	GinkgoHelper()
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	st, reason := corev1.ConditionFalse, "MinimumReplicasUnavailable"
	if available {
		st, reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
	}
	now := metav1.Now()
	d.Status.ObservedGeneration = d.Generation
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: st, Reason: reason, LastUpdateTime: now, LastTransitionTime: now}}
	_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// patchSiteLabels applies a JSON merge patch to StaticSite ns/name and
// returns its new resourceVersion.
func patchSiteLabels(ctx context.Context, ns, name, patch string) string {
	GinkgoHelper()
	u, err := dyn.Resource(siteGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred(), "patch StaticSite %s/%s with %s", ns, name, patch)
	return u.GetResourceVersion()
}

// makeAvailable writes, once converge created it, the status of Deployment
// ns/name (no replicas) as the Deployment controller does.
func makeAvailable(ctx context.Context, ns, name string) {
	GinkgoHelper()
	var d *appsv1.Deployment
	Eventually(ctx, func() (err error) {
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}).Should(Succeed(), "Deployment %s is applied", name)
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
	}}
	_, err := kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// childEvent is a watch event of a child, with its resourceVersion.
type childEvent struct {
	kind, name string
	typ        watch.EventType
	rv         uint64
	obj        *unstructured.Unstructured
}

// childEvents records every watch event of the graph's child kinds in ns,
// from when it is called: the order of the API server's writes.
type childEvents struct {
	mu     sync.Mutex
	events []childEvent // mu guards it
}

func watchChildren(ctx context.Context, ns string) *childEvents {
	GinkgoHelper()
	ce := &childEvents{}
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"ConfigMap":  {Version: "v1", Resource: "configmaps"},
		"Job":        {Group: "batch", Version: "v1", Resource: "jobs"},
		"Deployment": {Group: "apps", Version: "v1", Resource: "deployments"},
		"Service":    {Version: "v1", Resource: "services"},
	} {
		w, err := dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		go func() {
			defer GinkgoRecover()
			for e := range w.ResultChan() {
				u, ok := e.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
				ce.mu.Lock()
				ce.events = append(ce.events, childEvent{kind: kind, name: u.GetName(), typ: e.Type, rv: rv, obj: u})
				ce.mu.Unlock()
			}
		}()
	}
	return ce
}

// first returns the resourceVersion of the first event of kind/name that
// matches, or 0.
func (ce *childEvents) first(kind, name string, match func(childEvent) bool) func() uint64 {
	return func() uint64 {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		for _, e := range ce.events {
			if e.kind == kind && e.name == name && match(e) {
				return e.rv
			}
		}
		return 0
	}
}

func added(e childEvent) bool   { return e.typ == watch.Added }
func deleted(e childEvent) bool { return e.typ == watch.Deleted }

func jobComplete(e childEvent) bool {
	conds, _, _ := unstructured.NestedSlice(e.obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Complete" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func deploymentAvailable(e childEvent) bool {
	conds, _, _ := unstructured.NestedSlice(e.obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

var _ = Describe("declarative children in order", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("applies each child once what it is After is ready, reports the wait, and deletes in reverse order", func(ctx SpecContext) {
		events := watchChildren(ctx, ns)
		startGraphSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})

		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(And(
			readyWith(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete) since "),
			HaveField("Status", metav1.ConditionFalse)))
		_, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment web exists before Job migrate is Complete: %v", err)

		completeJob(ctx, ns, "migrate")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "Service web waits for Deployment web (Available) since "))
		makeAvailable(ctx, ns, "web")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(And(
			readyWith(declarative.ChildrenReadyReason, "all 4 children are ready"),
			HaveField("Status", metav1.ConditionTrue)))

		// Each child was created after what it is After was ready, in the
		// API server's order of writes.
		configAdded := events.first("ConfigMap", "config", added)()
		migrateAdded := events.first("Job", "migrate", added)()
		migrateComplete := events.first("Job", "migrate", jobComplete)()
		webAdded := events.first("Deployment", "web", added)()
		webAvailable := events.first("Deployment", "web", deploymentAvailable)()
		svcAdded := events.first("Service", "web", added)()
		Expect([]uint64{configAdded, migrateAdded, migrateComplete, webAdded, webAvailable, svcAdded}).To(
			And(Not(ContainElement(BeZero())), Satisfy(sortedStrictly)),
			"resourceVersions of: config created, migrate created, migrate Complete, web created, web Available, Service created")

		site, err := getSite(ctx, ns, "site")
		Expect(err).NotTo(HaveOccurred())
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, func() bool { _, err := getSite(ctx, ns, "site"); return apierrors.IsNotFound(err) }).
			WithTimeout(time.Minute).Should(BeTrue(), "the parent is deleted once its children are")
		Eventually(ctx, func() []uint64 {
			return []uint64{events.first("Service", "web", deleted)(), events.first("Deployment", "web", deleted)(),
				events.first("Job", "migrate", deleted)(), events.first("ConfigMap", "config", deleted)()}
		}).Should(And(Not(ContainElement(BeZero())), Satisfy(sortedStrictly)),
			"deleted in reverse order: Service, Deployment, Job, ConfigMap")
	}, SpecTimeout(3*time.Minute))

	It("reports a cycle naming both children and applies nothing", func(ctx SpecContext) {
		startGraphSites(ctx, ns)
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})
		patchSite(ctx, ns, site.Name, `{"metadata":{"labels":{"cycle":"yes"}}}`)
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildGraphReason, "ConfigMap config and Job migrate are After each other"))
		Eventually(ctx, func() ([]string, error) {
			l, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			var reasons []string
			for _, e := range l.Items {
				reasons = append(reasons, e.Type+"/"+e.Reason)
			}
			return reasons, err
		}).Should(ContainElement("Warning/" + declarative.ChildGraphReason))
	}, SpecTimeout(2*time.Minute))

	It("adds a conditional child while its condition holds and prunes it after", func(ctx SpecContext) {
		startGraphSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages, MinAvailable: new(int32(1))})
		Eventually(ctx, func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		patchSite(ctx, ns, "site", `{"spec":{"minAvailable":null}}`)
		Eventually(ctx, func() bool {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "ConfigMap extra is pruned")
	}, SpecTimeout(2*time.Minute))

	It("resumes the graph where it was after a restart of the manager, and keeps a dependent whose dependency is deleted by hand", func(ctx SpecContext) {
		run := startGraphSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete)"))
		run.stop(ctx)
		completeJob(ctx, ns, "migrate")
		startGraphSites(ctx, ns)
		makeAvailable(ctx, ns, "web")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildrenReadyReason, ""))

		web, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(kube.BatchV1().Jobs(ns).Delete(ctx, "migrate", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)})).To(Succeed())
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete)"))
		Consistently(ctx, func() (string, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(d.UID), nil
		}).WithTimeout(3*time.Second).Should(Equal(string(web.UID)), "Deployment web is kept while Job migrate runs again")
	}, SpecTimeout(4*time.Minute))

	It("writes the parent's status once per change of readiness while a child flaps, and not at all for changes that alter none", func(ctx SpecContext) {
		startGraphSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete)"))
		completeJob(ctx, ns, "migrate")
		makeAvailable(ctx, ns, "web")
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildrenReadyReason, "all 4 children are ready"))

		site, err := getSite(ctx, ns, "site")
		Expect(err).NotTo(HaveOccurred())
		w, err := dyn.Resource(siteGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=site", ResourceVersion: site.ResourceVersion})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)

		// Deployment web flaps: Available goes False and True again, each
		// time seen by the parent's Ready condition before the next flip.
		const flips = 4
		for i := range flips {
			available := i%2 == 1
			setDeploymentAvailable(ctx, ns, "web", available)
			if available {
				Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildrenReadyReason, ""))
			} else {
				Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.WaitingReason, "Service web waits for Deployment web (Available)"))
			}
		}
		// Changes to the child that alter no readiness, then one write of
		// the parent's labels to mark the end.
		for n := range 3 {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			d.Status.Conditions = append(d.Status.Conditions[:1], appsv1.DeploymentCondition{
				Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: fmt.Sprint("Step", n), LastUpdateTime: metav1.Now()})
			_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		end := patchSiteLabels(ctx, ns, "site", `{"metadata":{"labels":{"flapping":"over"}}}`)
		writes := 0
		for e := range w.ResultChan() {
			obj, ok := e.Object.(metav1.Object)
			Expect(ok).To(BeTrue(), "watch: %v", e.Object)
			writes++
			if obj.GetResourceVersion() == end {
				break
			}
		}
		Expect(writes).To(Equal(flips+1),
			"the parent was written %d times for %d changes of readiness and 1 of its labels", writes, flips)
	}, SpecTimeout(3*time.Minute))

	It("leaves a foreign object in the graph alone and applies nothing After it", func(ctx SpecContext) {
		createConfigMap(ctx, ns, "config", map[string]string{"owner": "someone else"})
		startGraphSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(readyWith(declarative.ChildFailedReason, "ConfigMap config could not be applied: "))
		site, err := getSite(ctx, ns, "site")
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.FindStatusCondition(site.Status.Conditions, declarative.ChildConflictCondition)).To(HaveField("Status", metav1.ConditionTrue))
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data).To(Equal(map[string]string{"owner": "someone else"}))
		_, err = kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Job migrate, After the foreign ConfigMap, was applied: %v", err)
	}, SpecTimeout(2*time.Minute))
})

// sortedStrictly reports whether the resourceVersions grow.
func sortedStrictly(rvs []uint64) bool {
	for i := 1; i < len(rvs); i++ {
		if rvs[i] <= rvs[i-1] {
			return false
		}
	}
	return true
}

// pages are the pages of the graph specs' StaticSites (required, unused).
var pages = map[string]string{"index.html": "graph"}
