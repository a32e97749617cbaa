package fake_test

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

// A second field manager's apply of a field another owns conflicts,
// unless forced.
func TestApplyConflictsOnAnotherManagersField(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	created, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"owned": "by-a"}), metav1.ApplyOptions{FieldManager: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" {
		t.Errorf("apply of a missing object: uid %q, resourceVersion %q; want it created", created.UID, created.ResourceVersion)
	}
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"owned": "by-b"}), metav1.ApplyOptions{FieldManager: "b"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), ".data.owned") {
		t.Fatalf("apply of a's field by b: got %v, want a Conflict naming manager a and .data.owned", err)
	}
	// Another field is b's to take; a's field is b's only when forced.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"mine": "b"}), metav1.ApplyOptions{FieldManager: "b"}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"owned": "by-b", "mine": "b"}), metav1.ApplyOptions{FieldManager: "b", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["owned"] != "by-b" || got.Data["mine"] != "b" {
		t.Errorf("after b's forced apply: data %v", got.Data)
	}
	// a no longer owns anything: applying without its field removes nothing of b's.
	got, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{}), metav1.ApplyOptions{FieldManager: "a"})
	if err != nil || got.Data["owned"] != "by-b" {
		t.Errorf("a's empty apply after losing the field: %v, data %v; want b's value kept", err, got.GetObjectMeta())
	}
	// A field the manager leaves out of its next apply is removed.
	got, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"owned": "by-b"}), metav1.ApplyOptions{FieldManager: "b"})
	if _, ok := got.Data["mine"]; err != nil || ok {
		t.Errorf("b's apply without .data.mine: %v, data %v; want it removed", err, got.Data)
	}
	managers := map[string]bool{}
	for _, e := range got.ManagedFields {
		managers[e.Manager] = true
	}
	if !managers["b"] {
		t.Errorf("managedFields %v lack manager b", got.ManagedFields)
	}
	// An unchanged apply keeps the resourceVersion.
	again, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"owned": "by-b"}), metav1.ApplyOptions{FieldManager: "b"})
	if err != nil || again.ResourceVersion != got.ResourceVersion {
		t.Errorf("unchanged apply: resourceVersion %s → %s (%v)", got.ResourceVersion, again.ResourceVersion, err)
	}
}

// Apply of a custom resource's status goes to the status subresource; its
// spec is the main resource's.
func TestApplyToTheStatusSubresource(t *testing.T) {
	_, dc := clients(t, fake.Options{})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u := unstructuredSite("s")
	_ = unstructured.SetNestedField(u.Object, "nginx", "spec", "image")
	_ = unstructured.SetNestedField(u.Object, "http://ignored", "status", "url")
	created, err := sites.Apply(ctx, "s", u, metav1.ApplyOptions{FieldManager: "user"})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(created.Object, "status", "url"); found {
		t.Errorf("an apply to the main resource wrote the status: %v", created.Object["status"])
	}
	st := unstructuredSite("s")
	_ = unstructured.SetNestedField(st.Object, "http://s.ns.svc", "status", "url")
	_ = unstructured.SetNestedField(st.Object, "ignored", "spec", "image")
	got, err := sites.ApplyStatus(ctx, "s", st, metav1.ApplyOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatal(err)
	}
	url, _, _ := unstructured.NestedString(got.Object, "status", "url")
	image, _, _ := unstructured.NestedString(got.Object, "spec", "image")
	if url != "http://s.ns.svc" || image != "nginx" || got.GetGeneration() != 1 {
		t.Errorf("after a status apply: url %q, image %q, generation %d; want the status only written", url, image, got.GetGeneration())
	}
	missing := unstructuredSite("missing")
	if _, err := sites.ApplyStatus(ctx, "missing", missing, metav1.ApplyOptions{FieldManager: "controller"}); !apierrors.IsNotFound(err) {
		t.Errorf("status apply of a missing object: got %v, want NotFound", err)
	}
}

func TestPatchTypes(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}, Spec: appsv1.DeploymentSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}}}},
	}}
	cs, dc := clients(t, fake.Options{Objects: []object.Object{d, configMap("cm", "k", "v", "drop", "x")}})
	ctx := t.Context()

	// A strategic merge patch merges containers by name.
	got, err := cs.AppsV1().Deployments("ns").Patch(ctx, "d", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:2"}]}}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := got.Spec.Template.Spec.Containers; len(cs) != 2 || cs[0].Image != "a:1" || cs[1].Image != "b:2" {
		t.Errorf("after a strategic merge patch: containers %v", cs)
	}
	if got.Generation != 2 {
		t.Errorf("a spec patch left generation %d, want 2", got.Generation)
	}
	// A JSON merge patch replaces lists and removes fields set to null.
	cm, err := cs.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"k":"merged","drop":null}}`), metav1.PatchOptions{})
	if err != nil || cm.Data["k"] != "merged" || len(cm.Data) != 1 {
		t.Errorf("after a merge patch: %v, data %v", err, cm.GetObjectMeta())
	}
	// A JSON patch's test operation guards the patch.
	_, err = cs.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"other"},{"op":"replace","path":"/data/k","value":"x"}]`), metav1.PatchOptions{})
	if err == nil || apierrors.ReasonForError(err) == metav1.StatusReasonUnknown && !strings.Contains(err.Error(), "cm") {
		t.Errorf("failing JSON patch test: got %v, want an error naming the object", err)
	}
	cm, err = cs.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"merged"},{"op":"replace","path":"/data/k","value":"json"}]`), metav1.PatchOptions{})
	if err != nil || cm.Data["k"] != "json" {
		t.Errorf("after a JSON patch: %v, data %v", err, cm.GetObjectMeta())
	}
	// A patch naming a stale resourceVersion conflicts.
	_, err = cs.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"k":"late"}}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("merge patch with a stale resourceVersion: got %v, want a Conflict", err)
	}
	// Custom resources have no strategic merge patch.
	if _, err := dc.Resource(staticSites).Namespace("ns").Create(ctx, unstructuredSite("s"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = dc.Resource(staticSites).Namespace("ns").Patch(ctx, "s", types.StrategicMergePatchType, []byte(`{"spec":{"image":"x"}}`), metav1.PatchOptions{})
	if apierrors.ReasonForError(err) != metav1.StatusReasonUnsupportedMediaType {
		t.Errorf("strategic merge patch of a custom resource: got %v, want UnsupportedMediaType", err)
	}
}

// staticSiteCRD is the StaticSite CRD of examples/staticsite, as installed
// on a cluster.
func staticSiteCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile("../../examples/staticsite/config/crd/example.converge.dev_staticsites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// An apply naming a UID creates nothing when no object has it
// (kube-apiserver: 409, "uid mismatch"), and over another object it is a
// change of the immutable metadata.uid (422).
func TestApplyNamingAUIDCreatesNothing(t *testing.T) {
	_, dc := clients(t, fake.Options{})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u := unstructuredSite("gone")
	u.SetUID("0b6f3ad2-5c1e-4a8e-9e55-2f7d8a4f1c11")
	_ = unstructured.SetNestedField(u.Object, "nginx", "spec", "image")
	_, err := sites.Apply(ctx, "gone", u, metav1.ApplyOptions{FieldManager: "m"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "uid mismatch: the provided object specified uid 0b6f3ad2-5c1e-4a8e-9e55-2f7d8a4f1c11, and no existing object was found") {
		t.Errorf("apply naming a UID of no object: got %v, want a Conflict saying no object has the UID", err)
	}
	if _, err := sites.Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the refused apply: %v, want NotFound", err)
	}
	if _, err := sites.Create(ctx, unstructuredSite("s"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := unstructuredSite("s")
	other.SetUID("0b6f3ad2-5c1e-4a8e-9e55-2f7d8a4f1c11")
	_, err = sites.Apply(ctx, "s", other, metav1.ApplyOptions{FieldManager: "m"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("apply naming another object's UID: got %v, want Invalid naming metadata.uid", err)
	}
}

// Two managers applying status conditions of a custom resource each keep
// their own: the CRD says conditions is a list keyed by type.
func TestApplyMergesCustomResourceListsByTheirCRDKeys(t *testing.T) {
	condition := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	}
	applyCondition := func(t *testing.T, sites dynamic.ResourceInterface, manager, typ string) (*unstructured.Unstructured, error) {
		t.Helper()
		st := unstructuredSite("s")
		_ = unstructured.SetNestedSlice(st.Object, []any{condition(typ)}, "status", "conditions")
		return sites.ApplyStatus(t.Context(), "s", st, metav1.ApplyOptions{FieldManager: manager})
	}
	t.Run("with the CRD", func(t *testing.T) {
		_, dc := clients(t, fake.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{staticSiteCRD(t)}})
		sites := dc.Resource(staticSites).Namespace("ns")
		if _, err := sites.Create(t.Context(), unstructuredSite("s"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := applyCondition(t, sites, "a", "Ready"); err != nil {
			t.Fatal(err)
		}
		got, err := applyCondition(t, sites, "b", "Synced")
		if err != nil {
			t.Fatalf("b's condition beside a's: %v, want both kept", err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		var types []string
		for _, c := range conds {
			types = append(types, c.(map[string]any)["type"].(string))
		}
		if strings.Join(types, ",") != "Ready,Synced" {
			t.Errorf("conditions %v, want Ready,Synced", types)
		}
		// a's next apply without its condition removes it, and only it.
		st := unstructuredSite("s")
		_ = unstructured.SetNestedField(st.Object, "http://s", "status", "url")
		if got, err = sites.ApplyStatus(t.Context(), "s", st, metav1.ApplyOptions{FieldManager: "a"}); err != nil {
			t.Fatal(err)
		}
		conds, _, _ = unstructured.NestedSlice(got.Object, "status", "conditions")
		if len(conds) != 1 || conds[0].(map[string]any)["type"] != "Synced" {
			t.Errorf("after a dropped Ready: conditions %v, want Synced alone", conds)
		}
	})
	// Without the CRD, conditions merge by type as a conventional CRD
	// declares them; other lists stay atomic.
	t.Run("without it", func(t *testing.T) {
		_, dc := clients(t, fake.Options{})
		sites := dc.Resource(staticSites).Namespace("ns")
		if _, err := sites.Create(t.Context(), unstructuredSite("s"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := applyCondition(t, sites, "a", "Ready"); err != nil {
			t.Fatal(err)
		}
		got, err := applyCondition(t, sites, "b", "Synced")
		if err != nil {
			t.Fatalf("b's condition beside a's without the CRD: %v, want both kept, as kube-apiserver does with a CRD whose conditions are a map list", err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if len(conds) != 2 {
			t.Errorf("conditions %v, want a's and b's", conds)
		}
		// A field of the spec another manager owns still conflicts.
		apply := func(manager, image string) error {
			st := unstructuredSite("s")
			_ = unstructured.SetNestedField(st.Object, image, "spec", "image")
			_, err := sites.Apply(t.Context(), "s", st, metav1.ApplyOptions{FieldManager: manager})
			return err
		}
		if err := apply("a", "x"); err != nil {
			t.Fatal(err)
		}
		if err := apply("b", "y"); !apierrors.IsConflict(err) {
			t.Errorf("b's spec.image over a's: got %v, want a Conflict", err)
		}
	})
}

func TestCRDsMustServeAKindOfTheScheme(t *testing.T) {
	crd := staticSiteCRD(t)
	crd.Spec.Names.Kind = "Elsewhere"
	_, err := fake.NewServer(fake.Options{Scheme: staticSiteScheme(t), CRDs: []*apiextensionsv1.CustomResourceDefinition{crd, nil}})
	if err == nil || !strings.Contains(err.Error(), "Options.CRDs[0] (staticsites.example.converge.dev): no version of Elsewhere.example.converge.dev is in Options.Scheme") ||
		!strings.Contains(err.Error(), "Options.CRDs[1] is nil") {
		t.Errorf("got %v, want errors naming both CRDs", err)
	}
}

// A write through a custom resource's status subresource keeps the old
// metadata, as kube-apiserver's status strategy does: labels, annotations
// and finalizers it carries are ignored, and its field manager owns none
// of them, so another manager's apply of them does not conflict.
func TestStatusWritesKeepTheMetadata(t *testing.T) {
	_, dc := clients(t, fake.Options{})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u := unstructuredSite("s")
	u.SetLabels(map[string]string{"app": "site"})
	if _, err := sites.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withMetadata := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetLabels(map[string]string{"app": "status", "added": "by-status"})
		u.SetAnnotations(map[string]string{"note": "by-status"})
		u.SetFinalizers([]string{"example.com/by-status"})
		return u
	}
	check := func(what string, got *unstructured.Unstructured) {
		t.Helper()
		if len(got.GetManagedFields()) == 0 {
			t.Errorf("after %s: no managedFields", what)
		}
		if l := got.GetLabels(); len(l) != 1 || l["app"] != "site" || len(got.GetAnnotations()) != 0 || len(got.GetFinalizers()) != 0 {
			t.Errorf("after %s: labels %v, annotations %v, finalizers %v; want the old metadata", what, l, got.GetAnnotations(), got.GetFinalizers())
		}
		for _, e := range got.GetManagedFields() {
			if e.Subresource == "status" && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), "f:metadata") {
				t.Errorf("after %s: manager %s of the status owns %s, want the status only", what, e.Manager, e.FieldsV1.Raw)
			}
		}
	}
	st := withMetadata(unstructuredSite("s"))
	_ = unstructured.SetNestedField(st.Object, "http://s.ns.svc", "status", "url")
	got, err := sites.ApplyStatus(ctx, "s", st, metav1.ApplyOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatal(err)
	}
	if url, _, _ := unstructured.NestedString(got.Object, "status", "url"); url != "http://s.ns.svc" {
		t.Errorf("status apply: url %q", url)
	}
	check("a status apply", got)
	// The labels are the main resource's: a manager applies them without
	// conflicting with the status's.
	a := unstructuredSite("s")
	a.SetLabels(map[string]string{"app": "site", "added": "by-user"})
	if _, err := sites.Apply(ctx, "s", a, metav1.ApplyOptions{FieldManager: "user"}); err != nil {
		t.Errorf("apply of labels the status apply carried: %v, want no conflict", err)
	}
	a.SetLabels(map[string]string{"app": "site"})
	if _, err := sites.Apply(ctx, "s", a, metav1.ApplyOptions{FieldManager: "user"}); err != nil {
		t.Fatal(err)
	}

	got, err = sites.Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(got.Object, "http://updated", "status", "url")
	got, err = sites.UpdateStatus(ctx, withMetadata(got), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("a status update", got)
	patch := []byte(`{"metadata":{"labels":{"added":"by-status"},"annotations":{"note":"n"},"finalizers":["example.com/f"]},"status":{"url":"http://patched"}}`)
	got, err = sites.Patch(ctx, "s", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "patcher"}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if url, _, _ := unstructured.NestedString(got.Object, "status", "url"); url != "http://patched" {
		t.Errorf("status patch: url %q", url)
	}
	check("a status patch", got)
}
