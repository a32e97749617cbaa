package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/webapp/api/v1alpha1"
	"github.com/converge-dev/converge/examples/webapp/app"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// rig runs the WebApp controller on the fake API server, for WebApp ns/shop.
type rig struct {
	t     *testing.T
	mgr   *framework.Manager
	calls atomic.Int64 // of Desired
}

func start(t *testing.T, spec v1alpha1.WebAppSpec) *rig {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	web := &v1alpha1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop"}, Spec: spec}
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{web}})
	r := &rig{t: t, mgr: testenv.NewManager(t, srv.Config(), framework.Options{Scheme: s})}
	desired := func(ctx context.Context, web *v1alpha1.WebApp) (declarative.State, error) {
		r.calls.Add(1)
		return app.Desired(ctx, web)
	}
	d, err := declarative.New(r.mgr, declarative.Func[*v1alpha1.WebApp](desired), declarative.Options{ChildKinds: app.Children()})
	if err != nil {
		t.Fatal(err)
	}
	err = framework.NewBuilder[*v1alpha1.WebApp](r.mgr, "webapp", framework.ControllerOptions{}).Complete(d)
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, r.mgr)
	return r
}

// get reads ns/name into obj; false when there is none.
func (r *rig) get(name string, obj object.Object) bool {
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

// waitReady waits for the WebApp's Ready condition to have reason and a
// message that starts with prefix.
func (r *rig) waitReady(reason, prefix string) {
	r.t.Helper()
	var last *metav1.Condition
	defer func() {
		if r.t.Failed() {
			r.t.Logf("the last Ready condition: %+v", last)
		}
	}()
	testenv.Eventually(r.t, "Ready "+reason+" "+prefix, func() bool {
		web := &v1alpha1.WebApp{}
		r.get("shop", web)
		last = meta.FindStatusCondition(web.Status.Conditions, declarative.ReadyCondition)
		return last != nil && last.Reason == reason && strings.HasPrefix(last.Message, prefix)
	})
}

// settle returns once a reconcile of shop that started after the call
// has ended: it changes a label twice and waits for Desired each time (a
// parent is reconciled by one worker at a time, so the second call comes
// after the end of the first reconcile).
func (r *rig) settle() {
	r.t.Helper()
	for range 2 {
		n := r.calls.Load()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"settle":"%d"}}}`, n)
		if err := r.mgr.Client().Patch(r.t.Context(), &v1alpha1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop"}}, types.MergePatchType, []byte(patch)); err != nil {
			r.t.Fatal(err)
		}
		testenv.Eventually(r.t, "Desired runs again", func() bool { return r.calls.Load() > n })
	}
}

// setStatus writes obj's status as its controller would.
func setStatus[C object.Object](r *rig, name string, obj C, edit func(C)) {
	r.t.Helper()
	r.get(name, obj)
	edit(obj)
	if err := r.mgr.Client().Status().Update(r.t.Context(), obj); err != nil {
		r.t.Fatal(err)
	}
}

func complete(j *batchv1.Job) {
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
}

func serving(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, AvailableReplicas: 1}
}

// migrationJob returns the name of the one migration Job of shop.
func (r *rig) migrationJob() string {
	r.t.Helper()
	jobs := &batchv1.JobList{}
	if err := r.mgr.APIReader().List(r.t.Context(), jobs); err != nil {
		r.t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		r.t.Fatalf("%d migration Jobs, want 1", len(jobs.Items))
	}
	return jobs.Items[0].Name
}

func TestWebAppRollsOutInOrder(t *testing.T) {
	r := start(t, v1alpha1.WebAppSpec{Image: "shop:1", Migrate: []string{"migrate", "up"}, Settings: map[string]string{"DB": "db:5432"}})
	r.waitReady(declarative.WaitingReason, "Deployment shop waits for Job shop-migrate-")
	job := r.migrationJob()
	if r.get("shop", &appsv1.Deployment{}) {
		t.Fatal("Deployment shop exists before its migration is Complete")
	}
	if !r.get("shop-settings", &corev1.ConfigMap{}) {
		t.Fatal("ConfigMap shop-settings is missing")
	}

	setStatus(r, job, &batchv1.Job{}, complete)
	r.waitReady(declarative.WaitingReason, "Service shop waits for Deployment shop (serving) since ")
	if r.get("shop", &corev1.Service{}) {
		t.Fatal("Service shop exists before Deployment shop serves")
	}
	setStatus(r, "shop", &appsv1.Deployment{}, serving)
	r.waitReady(declarative.ChildrenReadyReason, "all 4 children are ready")

	// A new image: a new migration Job, and the Deployment keeps the old
	// image until that Job is Complete.
	web := &v1alpha1.WebApp{}
	r.get("shop", web)
	web.Spec.Image = "shop:2"
	if err := r.mgr.Client().Update(t.Context(), web); err != nil {
		t.Fatal(err)
	}
	r.waitReady(declarative.WaitingReason, "Deployment shop waits for Job shop-migrate-")
	jobs := func() (names []string) {
		list := &batchv1.JobList{}
		if err := r.mgr.APIReader().List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		for _, j := range list.Items {
			names = append(names, j.Name)
		}
		return names
	}
	var next string
	testenv.Eventually(t, "a second migration Job", func() bool {
		for _, name := range jobs() {
			if name != job {
				next = name
			}
		}
		return next != ""
	})
	r.settle()
	d := &appsv1.Deployment{}
	r.get("shop", d)
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "shop:1" {
		t.Fatalf("Deployment shop runs %s before the migration of shop:2 is Complete", img)
	}
	// The Deployment that is left as it is was applied After the old Job:
	// that Job goes only once the Deployment has moved on.
	if !slices.Contains(jobs(), job) {
		t.Fatalf("Job %s was pruned while Deployment shop still ran its image", job)
	}
	setStatus(r, next, &batchv1.Job{}, complete)
	testenv.Eventually(t, "Deployment shop runs shop:2", func() bool {
		r.get("shop", d)
		return d.Spec.Template.Spec.Containers[0].Image == "shop:2"
	})
	testenv.Eventually(t, "the old migration Job is pruned", func() bool { return !slices.Contains(jobs(), job) })
}

func TestWebAppWithoutMigrationOrBudget(t *testing.T) {
	r := start(t, v1alpha1.WebAppSpec{Image: "shop:1", MinAvailable: new(int32(1))})
	r.waitReady(declarative.WaitingReason, "Service shop waits for Deployment shop (serving) since ")
	if jobs := (&batchv1.JobList{}); r.mgr.APIReader().List(t.Context(), jobs) != nil || len(jobs.Items) != 0 {
		t.Fatalf("a migration Job without spec.migrate: %+v", jobs.Items)
	}
	setStatus(r, "shop", &appsv1.Deployment{}, serving)
	r.waitReady(declarative.ChildrenReadyReason, "all 4 children are ready")
	if !r.get("shop", &policyv1.PodDisruptionBudget{}) {
		t.Fatal("no PodDisruptionBudget with spec.minAvailable set")
	}

	web := &v1alpha1.WebApp{}
	r.get("shop", web)
	web.Spec.MinAvailable = nil
	if err := r.mgr.Client().Update(t.Context(), web); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the PodDisruptionBudget is pruned", func() bool { return !r.get("shop", &policyv1.PodDisruptionBudget{}) })
	r.waitReady(declarative.ChildrenReadyReason, "all 3 children are ready")
}

func TestWebAppMigrationRunsOncePerImage(t *testing.T) {
	r := start(t, v1alpha1.WebAppSpec{Image: "shop:1", Migrate: []string{"migrate", "up"}})
	r.waitReady(declarative.WaitingReason, "Deployment shop waits for Job shop-migrate-")
	job := r.migrationJob()
	setStatus(r, job, &batchv1.Job{}, complete)
	r.waitReady(declarative.WaitingReason, "Service shop waits for Deployment shop (serving) since ")
	setStatus(r, "shop", &appsv1.Deployment{}, serving)
	r.waitReady(declarative.ChildrenReadyReason, "all 4 children are ready")

	// Kubernetes deletes the Job once its ttlSecondsAfterFinished passed:
	// the migration does not run again.
	j := &batchv1.Job{}
	r.get(job, j)
	if j.Spec.TTLSecondsAfterFinished == nil {
		t.Error("the migration Job has no ttlSecondsAfterFinished")
	}
	if err := r.mgr.Client().Delete(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if jobs := (&batchv1.JobList{}); r.mgr.APIReader().List(t.Context(), jobs) != nil || len(jobs.Items) != 0 {
		t.Fatalf("the migration ran again once its Job was deleted: %d Jobs", len(jobs.Items))
	}
	r.waitReady(declarative.ChildrenReadyReason, "all 4 children are ready")

	// A new image migrates again.
	web := &v1alpha1.WebApp{}
	r.get("shop", web)
	web.Spec.Image = "shop:2"
	if err := r.mgr.Client().Update(t.Context(), web); err != nil {
		t.Fatal(err)
	}
	r.waitReady(declarative.WaitingReason, "Deployment shop waits for Job shop-migrate-")
	if next := r.migrationJob(); next == job {
		t.Errorf("the migration of shop:2 runs in Job %s, the name of shop:1's", next)
	}
}

// TestREADMEOrderExample: the README's ordered-children block is Desired's
// body between its README markers, so that it compiles and is tested.
func TestREADMEOrderExample(t *testing.T) {
	src, err := os.ReadFile("app.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	body := between(t, string(src), "\t// README begin\n", "\t// README end\n")
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	block := "```go\n" + strings.Join(lines, "\n") + "\n```\n"
	if !strings.Contains(string(readme), block) {
		t.Errorf("README.md has no block\n%s(Desired's body between its README markers in examples/webapp/app/app.go)", block)
	}
	if n := len(lines); n >= 20 {
		t.Errorf("the README's ordered-children example is %d lines, want under 20", n)
	}
}

func between(t *testing.T, s, begin, end string) string {
	t.Helper()
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("no %q ... %q", begin, end)
	}
	return s[i+len(begin) : j]
}
