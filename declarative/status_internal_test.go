package declarative

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

func TestHasZero(t *testing.T) {
	for s, want := range map[string]bool{
		`{"a":1,"b":"x","c":true,"d":{"e":[1]}}`: false,
		`{"a":0}`:                                true,
		`{"a":1,"b":""}`:                         true,
		`{"c":false}`:                            true,
		`{"d":{}}`:                               true,
		`{"e":[]}`:                               true,
		`{"e":[{"f":1},{"f":0}]}`:                true,
		`{"g":0.5,"h":"0","i":[-1]}`:             false,
	} {
		if got := hasZero(decode(t, s)); got != want {
			t.Errorf("hasZero(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestStatusHeld(t *testing.T) {
	typed := func(rv string, status corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid", ResourceVersion: rv}, Status: status}
	}
	// PodStatus.Phase has omitempty, Conditions[].Status does not.
	cond := func(s corev1.ConditionStatus) corev1.PodStatus {
		return corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: "Ready", Status: s}}}
	}
	want := func(s corev1.PodStatus) any {
		m, err := toMap(&corev1.Pod{Status: s})
		if err != nil {
			t.Fatal(err)
		}
		out := m["status"].(map[string]any)
		dropNulls(out)
		return out
	}
	for _, tc := range []struct {
		name   string
		parent *corev1.Pod
		want   any
		last   *appliedStatus
		held   bool
	}{
		{"no zero value, equal", typed("1", corev1.PodStatus{Phase: "Running"}), want(corev1.PodStatus{Phase: "Running"}), nil, true},
		{"no zero value, different", typed("1", corev1.PodStatus{Phase: "Pending"}), want(corev1.PodStatus{Phase: "Running"}), nil, false},
		{"a zero value the typed parent may show without holding it", typed("1", cond("")), map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ""}}}, nil, false},
		{"applied by this process at this resourceVersion", typed("1", cond("")), map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ""}}}, &appliedStatus{resourceVersion: "1"}, true},
		{"applied by this process, written by someone since", typed("2", cond("")), map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ""}}}, &appliedStatus{resourceVersion: "1"}, false},
		{"another status applied by this process", typed("1", cond("")), map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ""}}}, &appliedStatus{resourceVersion: "1", hash: "other"}, false},
	} {
		d := &Declarative[*corev1.Pod]{}
		h, err := hashOf(map[string]any{"status": tc.want})
		if err != nil {
			t.Fatal(err)
		}
		if tc.last != nil {
			last := *tc.last
			if last.hash == "" {
				last.hash = h
			}
			d.statuses.set("uid", last)
		}
		if got := d.statusHeld(tc.parent, tc.want, h); got != tc.held {
			t.Errorf("%s: statusHeld = %v, want %v", tc.name, got, tc.held)
		}
	}
}

func TestStatusHeldUnstructuredIsExact(t *testing.T) {
	d := &Declarative[*unstructured.Unstructured]{}
	zero := map[string]any{"availableReplicas": int64(0)}
	held := &unstructured.Unstructured{Object: map[string]any{"status": zero}}
	absent := &unstructured.Unstructured{Object: map[string]any{}}
	want := map[string]any{"availableReplicas": float64(0)}
	if !d.statusHeld(held, want, "h") {
		t.Error("an unstructured parent holding availableReplicas: 0 does not hold it")
	}
	if d.statusHeld(absent, want, "h") {
		t.Error("an unstructured parent without a status holds availableReplicas: 0")
	}
}

func TestReconcileDeletedForgetsTheStatus(t *testing.T) {
	d := &Declarative[object.Object]{}
	d.statuses.set("a", appliedStatus{hash: "h", resourceVersion: "1"})
	d.statuses.set("b", appliedStatus{hash: "h", resourceVersion: "1"})
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("a")}}
	for _, tomb := range []reconcile.Tombstone[object.Object]{{Last: gone}, {}} { // {}: the cache never held it
		if res, err := d.ReconcileDeleted(t.Context(), tomb); err != nil || res != (reconcile.Result{}) {
			t.Fatalf("ReconcileDeleted = %+v, %v", res, err)
		}
	}
	if _, ok := d.statuses.get("a"); ok || d.statuses.len() != 1 {
		t.Errorf("after the deletion of a: %d statuses remembered, a among them: %v; want only b", d.statuses.len(), ok)
	}
}

func TestReportingController(t *testing.T) {
	for in, want := range map[string]string{
		"converge-foo":        "converge-foo",
		"example.com/foo-ctl": "example.com/foo-ctl",
		"team op:v1":          "team-op-v1",
		"-weird-":             "weird",
		"!!!":                 "converge",
	} {
		if got := reportingController(in); got != want {
			t.Errorf("reportingController(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChildMemory(t *testing.T) {
	var m childMemory
	a1 := appliedStatus{hash: "h1", resourceVersion: "1"}
	a2 := appliedStatus{hash: "h2", resourceVersion: "2"}
	if m.is("p", "c1", a1) {
		t.Fatal("an empty memory knows a child")
	}
	m.set("p", "c1", a1)
	m.set("p", "c2", a2)
	m.set("q", "c1", a2) // another parent, the same child UID
	if !m.is("p", "c1", a1) || !m.is("p", "c2", a2) || !m.is("q", "c1", a2) {
		t.Fatal("a child set is not known")
	}
	if m.is("p", "c1", a2) {
		t.Fatal("a child matches a status it was not applied with")
	}
	m.set("p", "c1", a2)
	if !m.is("p", "c1", a2) || m.is("p", "c1", a1) {
		t.Fatal("setting a child again did not replace its status")
	}
	if n := len(m.byParent["p"]); n != 2 {
		t.Fatalf("parent p holds %d entries after a child set twice, want 2", n)
	}
	m.drop("p", "c1")
	if m.is("p", "c1", a2) || !m.is("p", "c2", a2) {
		t.Fatal("drop removed the wrong child")
	}
	m.drop("p", "c2")
	if _, ok := m.byParent["p"]; ok {
		t.Fatal("a parent whose last child was dropped is still held")
	}
	m.forget("q")
	if m.is("q", "c1", a2) {
		t.Fatal("forget left a child of the parent")
	}
}
