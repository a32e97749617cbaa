package declarative_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// graphRig runs a declarative controller of StaticSite parents on the fake
// API server; its Desired declares what children returns, with a status
// that has conditions.
type graphRig struct {
	t   *testing.T
	mgr *framework.Manager
	key types.NamespacedName
	// calls counts the calls of Desired.
	calls atomic.Int64

	mu       sync.Mutex
	children func() []any // mu guards it
	// fail, when set, is the error Desired returns; mu guards it.
	fail error
}

func startGraph(t *testing.T, children func() []any) *graphRig {
	t.Helper()
	return startGraphWith(t, declarative.Options{
		ChildKinds: []object.Object{&corev1.ConfigMap{}, &batchv1.Job{}, &appsv1.Deployment{}, &corev1.Service{}},
	}, children)
}

// startGraphWith is startGraph with opts.
func startGraphWith(t *testing.T, opts declarative.Options, children func() []any) *graphRig {
	t.Helper()
	return startGraphOn(t, framework.Options{}, opts, children)
}

// startGraphOn is startGraphWith on a manager with mgrOpts (its Scheme
// set).
func startGraphOn(t *testing.T, mgrOpts framework.Options, opts declarative.Options, children func() []any) *graphRig {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site"}}
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{site}})
	r := &graphRig{t: t, key: types.NamespacedName{Namespace: "ns", Name: "site"}, children: children}
	mgrOpts.Scheme = s
	if testenv.Compact(t) {
		mgrOpts.Cache.Compact = testenv.CompactKinds(s, informers.CompactOptions{Decoded: 4})
	}
	r.mgr = testenv.NewManager(t, srv.Config(), mgrOpts)
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		r.calls.Add(1)
		r.mu.Lock()
		children, fail := r.children(), r.fail
		r.mu.Unlock()
		if fail != nil {
			return declarative.State{}, fail
		}
		return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
	}
	d, err := declarative.New(r.mgr, declarative.Func[*v1alpha1.StaticSite](desired), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.NewBuilder[*v1alpha1.StaticSite](r.mgr, "site", framework.ControllerOptions{}).Complete(d); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, r.mgr)
	return r
}

// declare replaces what Desired declares, and reconciles the parent.
func (r *graphRig) declare(children func() []any) {
	r.mu.Lock()
	r.children = children
	r.mu.Unlock()
	r.touch()
}

// change runs set under the lock the reconciler's children function runs
// under, then reconciles the parent: set changes a variable children reads.
func (r *graphRig) change(set func()) {
	r.mu.Lock()
	set()
	r.mu.Unlock()
	r.touch()
}

// touch changes the parent's labels, which reconciles it.
func (r *graphRig) touch() {
	r.t.Helper()
	patch := `{"metadata":{"labels":{"touched":"` + strings.Repeat("x", int(r.calls.Load()%50)+1) + `"}}}`
	if err := r.mgr.Client().Patch(r.t.Context(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name}}, types.MergePatchType, []byte(patch)); err != nil {
		r.t.Fatal(err)
	}
}

// settle returns once a reconcile that started after the call has
// finished: it touches the parent twice, waiting for Desired each time (a
// parent is reconciled by one worker at a time, so the second call of
// Desired comes after the end of the first reconcile).
func (r *graphRig) settle() {
	r.t.Helper()
	for range 2 {
		n := r.calls.Load()
		r.touch()
		testenv.Eventually(r.t, "Desired runs again", func() bool { return r.calls.Load() > n })
	}
}

// get reads obj (its namespace "ns") from the API server; false when there
// is none.
func (r *graphRig) get(name string, obj object.Object) bool {
	r.t.Helper()
	err := r.mgr.APIReader().Get(r.t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return true
}

// ready returns the parent's Ready condition, or nil.
func (r *graphRig) ready() *metav1.Condition {
	site := &v1alpha1.StaticSite{}
	r.get("site", site)
	return meta.FindStatusCondition(site.Status.Conditions, declarative.ReadyCondition)
}

// waitReady waits until the parent's Ready condition has reason and a
// message starting with prefix, and returns it.
func (r *graphRig) waitReady(reason, prefix string) *metav1.Condition {
	r.t.Helper()
	var c *metav1.Condition
	testenv.Eventually(r.t, "Ready has reason "+reason+" and a message starting "+prefix, func() bool {
		c = r.ready()
		return c != nil && c.Reason == reason && strings.HasPrefix(c.Message, prefix)
	})
	return c
}

// setStatus writes obj's status (read fresh, changed by edit) as its
// controller or the kubelet would.
func setStatus[C object.Object](r *graphRig, name string, obj C, edit func(C)) {
	r.t.Helper()
	// The controller may write the object between the read and the update
	// (or the cache may not hold its last write yet): read again and retry
	// on a conflict, as the object's own controller would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r.get(name, obj)
		edit(obj)
		return r.mgr.Client().Status().Update(r.t.Context(), obj)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func completeJob(j *batchv1.Job) {
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
}

func availableDeployment(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}}}
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
	}}
}

// threeLevels declares ConfigMap config, Job migrate after it, and
// Deployment web after the Job.
func threeLevels() []any {
	config, migrate := configMap("config"), job("migrate")
	return []any{
		declarative.NewChild(deployment("web")).After(migrate),
		declarative.NewChild(migrate).After(config),
		config,
	}
}

// startWebAfterMigrate starts threeLevels and completes Job migrate, so
// that Deployment web is applied.
func startWebAfterMigrate(t *testing.T) *graphRig {
	t.Helper()
	r := startGraph(t, threeLevels)
	r.waitReady(declarative.WaitingReason, "Deployment web waits for Job migrate")
	setStatus(r, "migrate", &batchv1.Job{}, completeJob)
	r.waitReady(declarative.NotReadyReason, "Deployment web")
	return r
}

func TestGraphAppliesEachChildOnceWhatItIsAfterIsReady(t *testing.T) {
	testenv.InBothForms(t, testGraphAppliesEachChildOnceWhatItIsAfterIsReady)
}

func testGraphAppliesEachChildOnceWhatItIsAfterIsReady(t *testing.T) {
	r := startGraph(t, threeLevels)
	c := r.waitReady(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete) since ")
	if c.Status != metav1.ConditionFalse || c.ObservedGeneration == 0 {
		t.Errorf("Ready = %+v, want False with the parent's generation", c)
	}
	r.settle()
	if r.get("web", &appsv1.Deployment{}) {
		t.Fatal("Deployment web exists before Job migrate is Complete")
	}
	cm, j := &corev1.ConfigMap{}, &batchv1.Job{}
	if !r.get("config", cm) || !r.get("migrate", j) {
		t.Fatal("ConfigMap config or Job migrate missing")
	}
	if rv(t, cm) >= rv(t, j) {
		t.Errorf("ConfigMap config (resourceVersion %s) was not created before Job migrate (%s)", cm.ResourceVersion, j.ResourceVersion)
	}
	if j.Annotations[declarative.AfterAnnotation] != "ConfigMap/ns/config" {
		t.Errorf("Job migrate's %s = %q", declarative.AfterAnnotation, j.Annotations[declarative.AfterAnnotation])
	}
	if r.ready().Message != c.Message {
		t.Errorf("the waiting message changed from %q to %q while the wait lasted", c.Message, r.ready().Message)
	}

	setStatus(r, "migrate", &batchv1.Job{}, completeJob)
	completed := &batchv1.Job{}
	r.get("migrate", completed)
	r.waitReady(declarative.NotReadyReason, "Deployment web is not ready yet (Available) since ")
	web := &appsv1.Deployment{}
	r.get("web", web)
	if rv(t, web) <= rv(t, completed) {
		t.Errorf("Deployment web (resourceVersion %s) was created before Job migrate was Complete (%s)", web.ResourceVersion, completed.ResourceVersion)
	}

	setStatus(r, "web", &appsv1.Deployment{}, availableDeployment)
	if c := r.waitReady(declarative.ChildrenReadyReason, "all 3 children are ready"); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
}

func TestGraphDeletesDependentsFirst(t *testing.T) {
	testenv.InBothForms(t, testGraphDeletesDependentsFirst)
}

func testGraphDeletesDependentsFirst(t *testing.T) {
	r := startWebAfterMigrate(t)
	// A finalizer of someone else's keeps web on the API server once deleted.
	web := &appsv1.Deployment{}
	r.get("web", web)
	web.Finalizers = []string{"example.com/hold"}
	if err := r.mgr.Client().Update(t.Context(), web); err != nil {
		t.Fatal(err)
	}

	r.declare(func() []any { return nil })
	testenv.Eventually(t, "Deployment web is being deleted", func() bool {
		d := &appsv1.Deployment{}
		return r.get("web", d) && d.DeletionTimestamp != nil
	})
	r.waitReady(declarative.WaitingReason, "Job migrate is deleted once Deployment web, which is After it, is gone since ")
	r.settle()
	if !r.get("migrate", &batchv1.Job{}) {
		t.Fatal("Job migrate was deleted while Deployment web, After it, was still on the API server")
	}
	if !r.get("config", &corev1.ConfigMap{}) {
		t.Fatal("ConfigMap config was deleted while Job migrate, After it, was still on the API server")
	}

	r.get("web", web)
	web.Finalizers = nil
	if err := r.mgr.Client().Update(t.Context(), web); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "every child is pruned", func() bool {
		return !r.get("web", &appsv1.Deployment{}) && !r.get("migrate", &batchv1.Job{}) && !r.get("config", &corev1.ConfigMap{})
	})
	testenv.Eventually(t, "the Ready condition of the waits for the prunes is gone", func() bool { return r.ready() == nil })
}

// A hand-made object carrying the parent's labels and an After annotation
// naming one of its children holds nothing back: the parent does not own
// it.
func TestGraphPrunesWhatAHandMadeCopyIsAfter(t *testing.T) {
	testenv.InBothForms(t, testGraphPrunesWhatAHandMadeCopyIsAfter)
}

func testGraphPrunesWhatAHandMadeCopyIsAfter(t *testing.T) {
	r := startGraph(t, func() []any { return []any{declarative.NewChild(configMap("config"))} })
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
	site := &v1alpha1.StaticSite{}
	r.get("site", site)
	copied := configMap("copy")
	copied.Namespace = "ns"
	copied.Labels = map[string]string{declarative.ParentUIDLabel: string(site.UID), declarative.ManagerLabel: "converge-staticsite"}
	copied.Annotations = map[string]string{declarative.AfterAnnotation: "ConfigMap/ns/config", declarative.ParentAnnotation: "ns/site"}
	if err := r.mgr.Client().Create(t.Context(), copied); err != nil {
		t.Fatal(err)
	}
	r.declare(func() []any { return []any{declarative.NewChild(configMap("other"))} })
	testenv.Eventually(t, "ConfigMap config is pruned", func() bool { return !r.get("config", &corev1.ConfigMap{}) })
	if !r.get("copy", &corev1.ConfigMap{}) {
		t.Error("the hand-made copy was deleted")
	}
}

// Every configuration error in what Desired returns is reported on the
// parent's Ready condition and in one Warning Event, nothing is applied,
// and the reconcile is not retried.
func TestGraphReportsConfigurationErrorsOnce(t *testing.T) {
	testenv.InBothForms(t, testGraphReportsConfigurationErrorsOnce)
}

func testGraphReportsConfigurationErrorsOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		children func() []any
		message  string
	}{
		{"kind not in Options.ChildKinds", func() []any {
			return []any{configMap("free"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}}
		}, "child Secret creds: kind Secret is not in declarative.Options.ChildKinds"},
		{"declared twice", func() []any { return []any{configMap("free"), configMap("free")} }, "child ConfigMap ns/free is declared twice"},
		{"without a name", func() []any { return []any{configMap("free"), configMap("")} }, "child 1 (ConfigMap): metadata.name is required"},
		{"nil", func() []any { return []any{configMap("free"), (*corev1.ConfigMap)(nil)} }, "child 1 (*v1.ConfigMap): nil pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startGraph(t, tc.children)
			c := r.waitReady(declarative.ChildGraphReason, "StaticSite ns/site: children: "+tc.message)
			if c.Status != metav1.ConditionFalse {
				t.Errorf("Ready = %+v, want False", c)
			}
			testenv.Eventually(t, "a Warning Event", func() bool { return hasEvent(t, r, declarative.ChildGraphReason) })
			r.settle()
			if r.get("free", &corev1.ConfigMap{}) {
				t.Error("a child was applied from a declaration with an error")
			}
			calls := r.calls.Load()
			r.settle()
			if got := r.calls.Load(); got != calls+2 {
				t.Errorf("Desired ran %d times for 2 changes of the parent: the error is retried", got-calls)
			}
			if n := countEvents(t, r, declarative.ChildGraphReason); n != 1 {
				t.Errorf("%d Warning Events for one unchanged error over several reconciles, want 1", n)
			}
		})
	}
}

func TestGraphReportsCyclesAndUndeclaredChildren(t *testing.T) {
	testenv.InBothForms(t, testGraphReportsCyclesAndUndeclaredChildren)
}

func testGraphReportsCyclesAndUndeclaredChildren(t *testing.T) {
	for _, tc := range []struct {
		name     string
		children func() []any
		message  []string
	}{
		{"cycle", func() []any {
			a, b := configMap("a"), job("b")
			return []any{declarative.NewChild(a).After(b), declarative.NewChild(b).After(a), configMap("free")}
		}, []string{"ConfigMap a", "Job b", "cycle"}},
		{"undeclared", func() []any {
			return []any{declarative.NewChild(deployment("web")).After(job("migrate")), configMap("free")}
		}, []string{"Deployment web is After Job migrate, which is not declared"}},
		{"kind not watched", func() []any {
			return []any{declarative.NewChild(deployment("web")).After(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}), configMap("free")}
		}, []string{"Deployment web", "Secret", "creds", "not in declarative.Options.ChildKinds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startGraph(t, tc.children)
			c := r.waitReady(declarative.ChildGraphReason, "")
			for _, s := range tc.message {
				if !strings.Contains(c.Message, s) {
					t.Errorf("Ready message %q does not say %q", c.Message, s)
				}
			}
			testenv.Eventually(t, "a Warning Event "+declarative.ChildGraphReason, func() bool {
				return hasEvent(t, r, declarative.ChildGraphReason)
			})
			if r.get("free", &corev1.ConfigMap{}) {
				t.Error("a child was applied although the order cannot be followed")
			}
		})
	}
}

func TestGraphIncludeWhenLeavesOutTheChildAndItsDependents(t *testing.T) {
	testenv.InBothForms(t, testGraphIncludeWhenLeavesOutTheChildAndItsDependents)
}

func testGraphIncludeWhenLeavesOutTheChildAndItsDependents(t *testing.T) {
	include := true
	children := func() []any {
		cm := configMap("optional")
		return []any{declarative.NewChild(cm).IncludeWhen(include), declarative.NewChild(job("after-optional")).After(cm), configMap("always")}
	}
	r := startGraph(t, children)
	r.waitReady(declarative.NotReadyReason, "Job after-optional is not ready yet (Complete)")
	if !r.get("optional", &corev1.ConfigMap{}) || !r.get("after-optional", &batchv1.Job{}) {
		t.Fatal("the included children are missing")
	}
	r.change(func() { include = false })
	testenv.Eventually(t, "the child left out and its dependent are pruned", func() bool {
		return !r.get("optional", &corev1.ConfigMap{}) && !r.get("after-optional", &batchv1.Job{})
	})
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
	if !r.get("always", &corev1.ConfigMap{}) {
		t.Error("ConfigMap always was pruned")
	}
}

func TestGraphKeepsADependentWhoseDependencyIsDeletedByHand(t *testing.T) {
	testenv.InBothForms(t, testGraphKeepsADependentWhoseDependencyIsDeletedByHand)
}

func testGraphKeepsADependentWhoseDependencyIsDeletedByHand(t *testing.T) {
	r := startWebAfterMigrate(t)
	web := &appsv1.Deployment{}
	r.get("web", web)
	old := &batchv1.Job{}
	r.get("migrate", old)
	if err := r.mgr.Client().Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	r.waitReady(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete)")
	again := &batchv1.Job{}
	if !r.get("migrate", again) || again.UID == old.UID {
		t.Fatal("Job migrate was not applied again")
	}
	r.settle()
	still := &appsv1.Deployment{}
	if !r.get("web", still) || still.UID != web.UID {
		t.Fatal("Deployment web was deleted or replaced when Job migrate was deleted by hand")
	}
}

func TestGraphReadinessFlappingWritesTheStatusOncePerChange(t *testing.T) {
	testenv.InBothForms(t, testGraphReadinessFlappingWritesTheStatusOncePerChange)
}

func testGraphReadinessFlappingWritesTheStatusOncePerChange(t *testing.T) {
	r := startGraph(t, func() []any {
		return []any{declarative.NewChild(job("flappy"))}
	})
	r.waitReady(declarative.NotReadyReason, "Job flappy is not ready yet (Complete)")
	site := &v1alpha1.StaticSite{}
	r.get("site", site)
	w := r.watchParent(site.ResourceVersion)
	const flips = 5
	for i := range flips {
		complete := i%2 == 0
		setStatus(r, "flappy", &batchv1.Job{}, func(j *batchv1.Job) {
			st := corev1.ConditionFalse
			if complete {
				st = corev1.ConditionTrue
			}
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: st}}
		})
		if complete {
			r.waitReady(declarative.ChildrenReadyReason, "")
		} else {
			r.waitReady(declarative.NotReadyReason, "")
		}
	}
	// Reconciles from a change to the child that alters no readiness
	// write nothing.
	for range 3 {
		n := r.calls.Load()
		setStatus(r, "flappy", &batchv1.Job{}, func(j *batchv1.Job) { j.Status.Active = int32(n%7) + 1 })
		testenv.Eventually(t, "Desired runs again", func() bool { return r.calls.Load() > n })
	}
	r.settle() // two writes of the parent's labels
	r.get("site", site)
	if got := w.writesUntil(site.ResourceVersion); got != flips+2 {
		t.Errorf("the parent was written %d times for %d changes of readiness and 2 of its labels, want %d", got, flips, flips+2)
	}
}

// parentWatch counts the writes of the parent.
type parentWatch struct {
	t *testing.T
	w watch.Interface
}

// watchParent watches the parent from resourceVersion rv.
func (r *graphRig) watchParent(rv string) *parentWatch {
	r.t.Helper()
	dyn, err := dynamic.NewForConfig(r.mgr.Config())
	if err != nil {
		r.t.Fatal(err)
	}
	w, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("staticsites")).Namespace("ns").Watch(r.t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=site", ResourceVersion: rv,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(w.Stop)
	return &parentWatch{t: r.t, w: w}
}

// writesUntil counts the writes watched up to the one that left the parent
// at resourceVersion rv.
func (p *parentWatch) writesUntil(rv string) int {
	p.t.Helper()
	n := 0
	for e := range p.w.ResultChan() {
		obj, ok := e.Object.(metav1.Object)
		if !ok {
			p.t.Fatalf("watch: %v", e.Object)
		}
		n++
		if obj.GetResourceVersion() == rv {
			return n
		}
	}
	p.t.Fatal("the watch ended before resourceVersion " + rv)
	return n
}

func rv(t *testing.T, obj metav1.Object) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("%s: resourceVersion %q: %v", obj.GetName(), obj.GetResourceVersion(), err)
	}
	return n
}

func TestGraphReadyWhenPanicIsRecoveredCountedAndReported(t *testing.T) {
	testenv.InBothForms(t, testGraphReadyWhenPanicIsRecoveredCountedAndReported)
}

func testGraphReadyWhenPanicIsRecoveredCountedAndReported(t *testing.T) {
	var logs testenv.Buffer
	r := startGraphOn(t, framework.Options{
		Logger:  logr.FromSlogHandler(slog.NewTextHandler(&logs, nil)),
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
	}, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}}, func() []any {
		return []any{
			declarative.NewChild(configMap("bad")).ReadyWhen("has field x", func(*corev1.ConfigMap) bool { panic("no field x") }),
			configMap("fine"),
		}
	})
	c := r.waitReady(declarative.ChildFailedReason, "ConfigMap bad is not ready (has field x): its ReadyWhen panicked: no field x")
	if c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", c)
	}
	if !r.get("fine", &corev1.ConfigMap{}) {
		t.Error("the other child was not applied")
	}
	testenv.Eventually(t, "the panic is counted", func() bool { return panics(t, r) > 0 })
	// The stack goes to the log only: the reconcile's error, which the
	// debug endpoint, its page and converge explain show, is one line.
	testenv.Eventually(t, "metrics served", func() bool { return r.mgr.MetricsAddress() != "" })
	var body string
	testenv.Eventually(t, "the debug endpoint shows the panic", func() bool {
		body = debugObject(t, r.mgr, "StaticSite", "ns", "site")
		return strings.Contains(body, `"result": "panic"`)
	})
	if !strings.Contains(body, `"error": "panic: declarative: ReadyWhen of ConfigMap bad panicked: no field x"`) || strings.Contains(body, "goroutine") {
		t.Errorf("the debug endpoint shows the panic as:\n%s\nwant one line, without the stack", body)
	}
	testenv.Eventually(t, "the log holds the stack", func() bool { return strings.Contains(logs.String(), "goroutine") })
}
