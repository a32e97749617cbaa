package declarative_test

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// knob is a kind the fake API server does not serve: its CRD is not
// installed.
var knob = schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Knob"}

func newKnob(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(knob)
	u.SetName(name)
	return u
}

func TestOptionalKindNotServedWaitsAndHoldsNothingBack(t *testing.T) {
	testenv.InBothForms(t, testOptionalKindNotServedWaitsAndHoldsNothingBack)
}

func testOptionalKindNotServedWaitsAndHoldsNothingBack(t *testing.T) {
	example := &unstructured.Unstructured{}
	example.SetGroupVersionKind(knob)
	r := startGraphWith(t, declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, example, &batchv1.Job{}}}, func() []any {
		return []any{configMap("config"), newKnob("dial"), declarative.NewChild(job("migrate")).After(newKnob("dial"))}
	})
	// Plain children (no NewChild) among them: the Ready condition says
	// what the Knob waits for.
	c := r.waitReady(declarative.WaitingReason, "Knob dial waits for CustomResourceDefinition knobs.e2e.converge.dev (kind Knob.e2e.converge.dev is not served) since ")
	if c.Status != metav1.ConditionFalse {
		t.Errorf("Ready is %s, want False", c.Status)
	}
	if !r.get("config", &corev1.ConfigMap{}) {
		t.Error("ConfigMap config, of a served kind, was not applied beside a Knob")
	}
	r.settle()
	if r.get("migrate", &batchv1.Job{}) {
		t.Error("Job migrate, After the Knob that waits for its kind, was applied")
	}
	// Without a Knob the parent converges.
	r.declare(func() []any { return []any{declarative.NewChild(configMap("config"))} })
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
}

func TestRunOnceChildIsNotCreatedAgainUntilItsContentChanges(t *testing.T) {
	testenv.InBothForms(t, testRunOnceChildIsNotCreatedAgainUntilItsContentChanges)
}

func testRunOnceChildIsNotCreatedAgainUntilItsContentChanges(t *testing.T) {
	image := "migrate:1"
	migrate := func() *batchv1.Job {
		j := job("migrate")
		j.Spec.Template.Spec.Containers[0].Image = image
		return j
	}
	children := func() []any {
		m := migrate()
		return []any{declarative.NewChild(m).RunOnce(), declarative.NewChild(configMap("after")).After(m)}
	}
	r := startGraph(t, children)
	r.waitReady(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete)")
	j := &batchv1.Job{}
	r.get("migrate", j)
	if j.Annotations[declarative.RunOnceAnnotation] == "" {
		t.Errorf("Job migrate has no %s annotation: %v", declarative.RunOnceAnnotation, j.Annotations)
	}
	setStatus(r, "migrate", &batchv1.Job{}, completeJob)
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	site := &v1alpha1.StaticSite{}
	testenv.Eventually(t, "the parent records the run", func() bool {
		r.get("site", site)
		return strings.Contains(site.Annotations[declarative.RanAnnotation], "=Job.batch/ns/migrate")
	})
	if f := strings.Fields(site.Annotations[declarative.RanAnnotation]); len(f) != 2 || f[0] != string(site.UID) {
		t.Errorf("annotation %s = %q, want the parent's UID and one entry", declarative.RanAnnotation, site.Annotations[declarative.RanAnnotation])
	}

	// Deleted as its ttlSecondsAfterFinished would: not created again, and
	// what is After it stays ready.
	if err := r.mgr.Client().Delete(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if r.get("migrate", &batchv1.Job{}) {
		t.Fatal("run-once Job migrate, Complete for its content, was created again once deleted")
	}
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")

	// A new content runs again, and what is After it waits for it.
	r.change(func() { image = "migrate:2" })
	testenv.Eventually(t, "Job migrate is created for its new content", func() bool { return r.get("migrate", &batchv1.Job{}) })
	r.waitReady(declarative.WaitingReason, "ConfigMap after waits for Job migrate (Complete)")
}

func TestRetainedChildHasNoOwnerReferenceAndIsReleasedWhenNoLongerDeclared(t *testing.T) {
	testenv.InBothForms(t, testRetainedChildHasNoOwnerReferenceAndIsReleasedWhenNoLongerDeclared)
}

func testRetainedChildHasNoOwnerReferenceAndIsReleasedWhenNoLongerDeclared(t *testing.T) {
	data := func() *corev1.ConfigMap { return configMap("data") }
	r := startGraph(t, func() []any { return []any{declarative.NewChild(data()).Retain(), configMap("plain")} })
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	cm := &corev1.ConfigMap{}
	r.get("data", cm)
	if len(cm.OwnerReferences) != 0 || cm.Annotations[declarative.RetainAnnotation] != "true" || cm.Labels[declarative.ParentUIDLabel] == "" {
		t.Fatalf("retained ConfigMap data: owner references %v, annotations %v, labels %v; want none, %s, and the parent's label",
			cm.OwnerReferences, cm.Annotations, cm.Labels, declarative.RetainAnnotation)
	}
	site := &v1alpha1.StaticSite{}
	r.get("site", site)
	if !strings.Contains(site.Annotations[declarative.LedgerAnnotation], string(cm.UID)+"=ConfigMap/ns/data") {
		t.Errorf("the parent's ledger %q does not record ConfigMap data (uid %s)", site.Annotations[declarative.LedgerAnnotation], cm.UID)
	}
	if len(site.Finalizers) == 0 {
		t.Error("a parent with a retained child has no finalizer")
	}

	r.declare(func() []any { return []any{declarative.NewChild(configMap("plain"))} })
	testenv.Eventually(t, "ConfigMap data is released", func() bool {
		cm = &corev1.ConfigMap{}
		return r.get("data", cm) && len(cm.Labels) == 0
	})
	if len(cm.Annotations) != 0 || len(cm.OwnerReferences) != 0 || cm.DeletionTimestamp != nil {
		t.Errorf("released ConfigMap data: annotations %v, owner references %v, deletion %v; want none", cm.Annotations, cm.OwnerReferences, cm.DeletionTimestamp)
	}
	// Declared again, it is someone else's: taken back with Adopt only.
	r.declare(func() []any {
		return []any{declarative.NewChild(configMap("plain")), declarative.NewChild(data()).Retain()}
	})
	r.waitReady(declarative.ChildFailedReason, "ConfigMap data could not be applied: ConfigMap ns/data already exists")
	r.declare(func() []any {
		return []any{declarative.NewChild(configMap("plain")), declarative.Adopt(declarative.NewChild(data()).Retain())}
	})
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	testenv.Eventually(t, "ConfigMap data is the parent's again", func() bool {
		cm = &corev1.ConfigMap{}
		return r.get("data", cm) && cm.Annotations[declarative.RetainAnnotation] == "true"
	})
}

func TestRetainedCopyMadeByHandIsNeitherReleasedNorApplied(t *testing.T) {
	testenv.InBothForms(t, testRetainedCopyMadeByHandIsNeitherReleasedNorApplied)
}

func testRetainedCopyMadeByHandIsNeitherReleasedNorApplied(t *testing.T) {
	r := startGraph(t, func() []any { return []any{declarative.NewChild(configMap("plain"))} })
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
	site := &v1alpha1.StaticSite{}
	r.get("site", site)
	// A copy carrying the parent's labels and converge's retain annotation,
	// which the parent's ledger does not list.
	copyOf := configMap("data")
	copyOf.Namespace = "ns"
	copyOf.Labels = map[string]string{declarative.ParentUIDLabel: string(site.UID), declarative.ManagerLabel: "converge-staticsite"}
	copyOf.Annotations = map[string]string{declarative.RetainAnnotation: "true", declarative.ParentAnnotation: "ns/site"}
	if err := r.mgr.Client().Create(t.Context(), copyOf); err != nil {
		t.Fatal(err)
	}
	r.settle()
	cm := &corev1.ConfigMap{}
	if !r.get("data", cm) || cm.Labels[declarative.ParentUIDLabel] != string(site.UID) {
		t.Fatalf("an undeclared copy the parent does not own was released or deleted: %+v", cm.ObjectMeta)
	}
	r.declare(func() []any {
		return []any{declarative.NewChild(configMap("plain")), declarative.NewChild(configMap("data")).Retain()}
	})
	r.waitReady(declarative.ChildFailedReason, "ConfigMap data could not be applied: ConfigMap ns/data already exists and is not managed by StaticSite ns/site: it carries the labels of StaticSite ns/site, but converge did not create it")
}
