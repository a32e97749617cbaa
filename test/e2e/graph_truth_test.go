package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// truthDesired declares, for a StaticSite S: ConfigMap S-config; Job
// S-migrate After it (built-in readiness: Complete, Failed a failure);
// Deployment S-web After the Job, ready when "serving" (Available for its
// generation), failed when "pods cannot be created" (ReplicaFailure). Its annotation e2e.converge.dev/bad breaks the declaration:
// "kind" (and "kind2") adds a Secret, a kind the controller does not list
// in Options.ChildKinds; "label" declares S-config without the label the
// cache selects ConfigMaps by.
func truthDesired(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	bad := site.Annotations["e2e.converge.dev/bad"]
	cmLabels := map[string]string{"e2e": "truth"}
	if bad == "label" {
		cmLabels = nil
	}
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-config", Labels: cmLabels}, Data: map[string]string{"k": "v"}}
	migrate := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-migrate"}, Spec: batchv1.JobSpec{
		BackoffLimit: new(int32(0)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "busybox"}}}},
	}}
	podLabels := map[string]string{"app": site.Name}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-web"}, Spec: appsv1.DeploymentSpec{
		Replicas: new(int32(0)),
		Selector: &metav1.LabelSelector{MatchLabels: podLabels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
	}}
	children := []any{
		config,
		declarative.NewChild(migrate).After(config),
		declarative.NewChild(web).After(migrate).ReadyWhen("serving", func(d *appsv1.Deployment) bool {
			return d.Status.ObservedGeneration == d.Generation && deploymentCondition(d, appsv1.DeploymentAvailable)
		}).FailedWhen("pods cannot be created", func(d *appsv1.Deployment) bool {
			return deploymentCondition(d, appsv1.DeploymentReplicaFailure)
		}),
	}
	switch bad {
	case "kind":
		children = append(children, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-creds"}})
	case "kind2":
		children = append(children, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-other-creds"}})
	}
	return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startTruthSites runs a manager with the truthDesired controller
// ("truth") and its debug endpoint on a loopback port; the cache selects
// ConfigMaps labelled e2e=truth.
func startTruthSites(ctx context.Context, ns string) (*runningManager, *framework.Manager) {
	GinkgoHelper()
	mgr := newManager(ns, framework.Options{
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{
			{Kind: "ConfigMap"}: {Labels: labels.SelectorFromSet(labels.Set{"e2e": "truth"})},
		}},
	})
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](truthDesired), declarative.Options{
		ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}, &appsv1.Deployment{}},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "truth", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	run := startManager(ctx, mgr)
	Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
	return run, mgr
}

// failJob writes the status of Job ns/name as the Job controller does once
// its pod failed past its backoff limit.
func failJob(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Eventually(ctx, func() error {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		}}
		_, err = kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		return err
	}).Should(Succeed())
}

// setDeploymentConditions writes the status of Deployment ns/name, for
// its current generation, with conds only, as the Deployment controller
// would.
func setDeploymentConditions(ctx context.Context, ns, name string, conds ...appsv1.DeploymentCondition) {
	GinkgoHelper()
	Eventually(ctx, func() error {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i := range conds {
			conds[i].LastUpdateTime, conds[i].LastTransitionTime = now, now
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: conds}
		_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	}).Should(Succeed())
}

// truth is what the three views say of one parent.
type truth struct {
	ready    *metav1.Condition
	code     int    // converge explain's exit status
	explain  string // its output
	page     string // the debug page explaining the parent
	listed   *introspect.NotConvergedKey
	listJSON string
}

// truthOf reads the parent's Ready condition, converge explain and the
// debug page (its explanation of the parent, and its list of the objects
// not converged).
func truthOf(ctx context.Context, mgr *framework.Manager, ns, name string) truth {
	GinkgoHelper()
	var t truth
	site, err := getSite(ctx, ns, name)
	Expect(err).NotTo(HaveOccurred())
	t.ready = meta.FindStatusCondition(site.Status.Conditions, declarative.ReadyCondition)
	base := "http://" + mgr.MetricsAddress()
	t.code, t.explain = explain(ctx, "StaticSite", ns+"/"+name, "--url", base)
	res, err := httpGet(ctx, http.DefaultClient, base+introspect.Path+"?"+url.Values{"controller": {"truth"}, "key": {ns + "/" + name}}.Encode())()
	Expect(err).NotTo(HaveOccurred())
	t.page = html.UnescapeString(res.Body)
	res, err = httpGet(ctx, http.DefaultClient, base+introspect.Path+"api/notconverged?controller=truth")()
	Expect(err).NotTo(HaveOccurred())
	t.listJSON = res.Body
	var p introspect.NotConvergedPage
	Expect(json.Unmarshal([]byte(res.Body), &p)).To(Succeed(), res.Body)
	for i := range p.Keys {
		if p.Keys[i].Namespace == ns && p.Keys[i].Name == name {
			t.listed = &p.Keys[i]
		}
	}
	return t
}

// sayTheSame matches a parent whose three views say what its Ready
// condition says: reason (in words, as explain spells it) and message
// word for word, not converged (exit status 1).
func sayTheSame(reason, words, message string) OmegaMatcher {
	return WithTransform(func(t truth) error {
		switch {
		case t.ready == nil || t.ready.Reason != reason || !strings.HasPrefix(t.ready.Message, message):
			return fmt.Errorf("Ready condition %+v, want reason %s and a message starting %q", t.ready, reason, message)
		case t.code != 1 || !strings.Contains(t.explain, "  "+words+": "+t.ready.Message):
			return fmt.Errorf("converge explain exited %d saying:\n%s\nwant 1 and the line %q", t.code, t.explain, words+": "+t.ready.Message)
		case !strings.Contains(t.page, words+": "+t.ready.Message):
			return fmt.Errorf("the page's explanation does not say %q", words+": "+t.ready.Message)
		case t.listed == nil || t.listed.State != words || t.listed.Detail != t.ready.Message:
			return fmt.Errorf("the page's list of objects not converged: %s; want the parent %s with its message", t.listJSON, words)
		}
		return nil
	}, Succeed())
}

var _ = Describe("declarative parents tell the truth", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("says the same in the Ready condition, converge explain and the debug page while a parent waits, is not ready, has a failed child, and converges", func(ctx SpecContext) {
		explain(ctx, "--help") // builds converge once, outside the Eventually below
		_, mgr := startTruthSites(ctx, ns)
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})
		createSite(ctx, ns, "broken", v1alpha1.StaticSiteSpec{Pages: pages})

		By("waiting for the Job, in the words of the built-in readiness")
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "site") }).
			Should(sayTheSame(declarative.WaitingReason, "waiting", "Deployment site-web waits for Job site-migrate (Complete) since "))

		By("a failed child")
		failJob(ctx, ns, "broken-migrate")
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "broken") }).
			Should(sayTheSame(declarative.ChildFailedReason, "child failed", "Job broken-migrate failed (BackoffLimitExceeded: Job has reached the specified backoff limit)"))

		By("the Deployment applied and not ready yet, in the words of its ReadyWhen")
		completeJob(ctx, ns, "site-migrate")
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "site") }).
			Should(sayTheSame(declarative.NotReadyReason, "not ready", "Deployment site-web is not ready yet (serving) since "))

		By("converged once it serves")
		makeAvailable(ctx, ns, "site-web")
		Eventually(ctx, func(g Gomega) {
			t := truthOf(ctx, mgr, ns, "site")
			g.Expect(t.ready).To(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue), HaveField("Reason", declarative.ChildrenReadyReason)))
			g.Expect(t.code).To(Equal(0), t.explain)
			g.Expect(t.explain).To(ContainSubstring("converged: last reconciled"))
			g.Expect(t.page).To(ContainSubstring("converged: last reconciled"))
			g.Expect(t.listed).To(BeNil(), "a converged parent is listed as not converged: %s", t.listJSON)
		}).Should(Succeed())
		Expect(truthOf(ctx, mgr, ns, "broken")).To(sayTheSame(declarative.ChildFailedReason, "child failed", "Job broken-migrate failed ("), "the failed child is still reported")
	}, SpecTimeout(4*time.Minute))

	It("says a Deployment failed, not waiting, once its rollout passed its progress deadline or its FailedWhen holds, and waits again once it does not", func(ctx SpecContext) {
		explain(ctx, "--help") // builds converge once, outside the Eventually below
		_, mgr := startTruthSites(ctx, ns)
		createSite(ctx, ns, "stuck", v1alpha1.StaticSiteSpec{Pages: pages})
		Eventually(ctx, siteReadyCondition(ctx, ns, "stuck")).Should(readyWith(declarative.WaitingReason, "Deployment stuck-web waits for Job stuck-migrate"))
		completeJob(ctx, ns, "stuck-migrate")
		Eventually(ctx, siteReadyCondition(ctx, ns, "stuck")).Should(readyWith(declarative.NotReadyReason, "Deployment stuck-web is not ready yet (serving)"))

		By("the Deployment controller giving up on the rollout")
		setDeploymentConditions(ctx, ns, "stuck-web", appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "stuck-web-5d4f" has timed out progressing.`})
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "stuck") }).
			Should(sayTheSame(declarative.ChildFailedReason, "child failed", `Deployment stuck-web failed (ProgressDeadlineExceeded: ReplicaSet "stuck-web-5d4f" has timed out progressing.)`))

		By("a failure the Child's FailedWhen recognises")
		setDeploymentConditions(ctx, ns, "stuck-web", appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
			Reason: "FailedCreate", Message: `pods "stuck-web-5d4f-x" is forbidden: exceeded quota`})
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "stuck") }).
			Should(sayTheSame(declarative.ChildFailedReason, "child failed", "Deployment stuck-web failed (pods cannot be created)"))

		By("the failure gone: a wait again, then ready")
		setDeploymentConditions(ctx, ns, "stuck-web")
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "stuck") }).
			Should(sayTheSame(declarative.NotReadyReason, "not ready", "Deployment stuck-web is not ready yet (serving) since "))
		makeAvailable(ctx, ns, "stuck-web")
		Eventually(ctx, siteReadyCondition(ctx, ns, "stuck")).Should(readyWith(declarative.ChildrenReadyReason, "all 3 children are ready"))
	}, SpecTimeout(3*time.Minute))

	It("says what a deleted parent's deletion waits for: a child held by someone else's finalizer, before what the child is After is deleted", func(ctx SpecContext) {
		explain(ctx, "--help") // builds converge once, outside the Eventually below
		_, mgr := startTruthSites(ctx, ns)
		createSite(ctx, ns, "held", v1alpha1.StaticSiteSpec{Pages: pages})
		Eventually(ctx, siteReadyCondition(ctx, ns, "held")).Should(readyWith(declarative.WaitingReason, "Deployment held-web waits for Job held-migrate"))
		completeJob(ctx, ns, "held-migrate")
		makeAvailable(ctx, ns, "held-web")
		Eventually(ctx, siteReadyCondition(ctx, ns, "held")).Should(readyWith(declarative.ChildrenReadyReason, "all 3 children are ready"))
		_, err := kube.AppsV1().Deployments(ns).Patch(ctx, "held-web", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("deleting the parent")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, "held", metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, func() truth { return truthOf(ctx, mgr, ns, "held") }).
			Should(sayTheSame(declarative.WaitingReason, "waiting", "deletion waits for Deployment held-web (Terminating, finalizer example.com/hold) since "))
		_, err = kube.BatchV1().Jobs(ns).Get(ctx, "held-migrate", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "Job held-migrate, which the Deployment is After, was deleted before it")

		By("removing the finalizer, which lets the deletion finish")
		_, err = kube.AppsV1().Deployments(ns).Patch(ctx, "held-web", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, func() bool {
			_, err := getSite(ctx, ns, "held")
			return apierrors.IsNotFound(err)
		}).WithTimeout(time.Minute).Should(BeTrue(), "the parent is deleted once its children are gone")
	}, SpecTimeout(3*time.Minute))

	It("reports a configuration error in what Desired returns on the parent, once, terminally, with nothing applied, across restarts", func(ctx SpecContext) {
		run, mgr := startTruthSites(ctx, ns)
		createSiteWithAnnotations(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages}, map[string]string{"e2e.converge.dev/bad": "kind"})
		createSiteWithAnnotations(ctx, ns, "unlabelled", v1alpha1.StaticSiteSpec{Pages: pages}, map[string]string{"e2e.converge.dev/bad": "label"})

		By("a child of a kind missing from Options.ChildKinds")
		const missingKind = "child Secret site-creds: kind Secret is not in declarative.Options.ChildKinds"
		Eventually(ctx, siteReadyCondition(ctx, ns, "site")).Should(And(readyWith(declarative.ChildGraphReason, missingKind), HaveField("Status", metav1.ConditionFalse)))
		Eventually(ctx, warningEvents(ctx, ns, "site", declarative.ChildGraphReason)).Should(ContainElement(HaveField("Note", ContainSubstring(missingKind))))
		code, out := explain(ctx, "StaticSite", ns+"/site", "--url", "http://"+mgr.MetricsAddress())
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("with a terminal error, not retried until the object changes: StaticSite " + ns + "/site: children: " + missingKind))
		for _, name := range []string{"site-config", "unlabelled-config"} {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap %s was applied from a declaration with an error: %v", name, err)
		}

		By("a child outside the cache's label selection")
		Eventually(ctx, siteReadyCondition(ctx, ns, "unlabelled")).Should(readyWith(declarative.ChildGraphReason,
			`child ConfigMap `+ns+`/unlabelled-config: its labels do not match the selector "e2e=truth"`))
		Eventually(ctx, warningEvents(ctx, ns, "unlabelled", declarative.ChildGraphReason)).Should(HaveLen(1))

		By("restarting the manager, which reconciles the parent again with the same error")
		run.stop(ctx)
		_, mgr = startTruthSites(ctx, ns)
		Eventually(ctx, func(g Gomega) {
			res, err := httpGet(ctx, http.DefaultClient, "http://"+mgr.MetricsAddress()+introspect.Path+"api/key?"+url.Values{"controller": {"truth"}, "namespace": {ns}, "name": {"site"}}.Encode())()
			g.Expect(err).NotTo(HaveOccurred())
			var ks introspect.KeyStatus
			g.Expect(json.Unmarshal([]byte(res.Body), &ks)).To(Succeed())
			g.Expect(ks.History).To(ContainElement(HaveField("Result", "terminal")))
		}).Should(Succeed())

		By("changing the error, which records a new Event after any the restart would have recorded")
		patchSite(ctx, ns, "site", `{"metadata":{"annotations":{"e2e.converge.dev/bad":"kind2"}}}`)
		Eventually(ctx, warningEvents(ctx, ns, "site", declarative.ChildGraphReason)).Should(ContainElement(HaveField("Note", ContainSubstring("site-other-creds"))))
		events, err := warningEvents(ctx, ns, "site", declarative.ChildGraphReason)()
		Expect(err).NotTo(HaveOccurred())
		var first []eventsv1.Event
		for _, e := range events {
			if strings.Contains(e.Note, missingKind) {
				first = append(first, e)
			}
		}
		Expect(first).To(HaveLen(1), "one Event for the first error, whatever the reconciles and restarts: %+v", first)
		Expect(first[0].Series).To(BeNil(), "the first error's Event was recorded again (a series): %+v", first[0].Series)
		Expect(first[0].DeprecatedCount).To(BeNumerically("<=", 1))
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("declarative adversarial cases", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("prunes a child that a hand-made copy carrying the parent's labels and After annotation names", func(ctx SpecContext) {
		startGraphSites(ctx, ns)
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages, MinAvailable: new(int32(1))})
		Eventually(ctx, func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy",
			Labels:      map[string]string{declarative.ParentUIDLabel: string(site.UID), declarative.ManagerLabel: siteFieldManager},
			Annotations: map[string]string{declarative.AfterAnnotation: "ConfigMap/" + ns + "/extra", declarative.ParentAnnotation: ns + "/site"},
		}}
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, copied, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		patchSite(ctx, ns, "site", `{"spec":{"minAvailable":null}}`)
		Eventually(ctx, func() bool {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "ConfigMap extra is pruned, although a hand-made object the parent does not own says it is After it")
		_, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, "copy", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the hand-made copy, not the parent's, was deleted")
	}, SpecTimeout(2*time.Minute))

	It("refuses an invalid Options.Finalizer at New, naming it", func() {
		mgr := newManager(ns, framework.Options{})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		_, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](truthDesired), declarative.Options{
			ChildKinds: []object.Object{&corev1.ConfigMap{}}, Finalizer: "not a/valid/finalizer name!",
		})
		Expect(err).To(MatchError(ContainSubstring(`Options.Finalizer "not a/valid/finalizer name!" is not a valid finalizer name`)))
	})
})

// warningEvents returns the Warning Events of reason in ns regarding the
// StaticSite name.
func warningEvents(ctx context.Context, ns, name, reason string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		l, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range l.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Regarding.Kind == "StaticSite" && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
		return out, nil
	}
}
