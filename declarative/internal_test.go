package declarative

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestContains(t *testing.T) {
	for _, tc := range []struct {
		name       string
		live, want string
		ok         bool
	}{
		{"equal", `{"a":1}`, `{"a":1}`, true},
		{"extra live fields are someone else's", `{"a":1,"b":2}`, `{"a":1}`, true},
		{"missing field", `{"b":2}`, `{"a":1}`, false},
		{"changed value", `{"a":2}`, `{"a":1}`, false},
		{"nested", `{"spec":{"replicas":3,"x":1}}`, `{"spec":{"replicas":3}}`, true},
		{"list element with defaults", `{"c":[{"name":"a","image":"x","pull":"Always"}]}`, `{"c":[{"name":"a","image":"x"}]}`, true},
		{"list element changed", `{"c":[{"name":"a","image":"y"}]}`, `{"c":[{"name":"a","image":"x"}]}`, false},
		{"list element added by another manager", `{"c":[{"name":"sidecar"},{"name":"a"}]}`, `{"c":[{"name":"a"}]}`, true},
		{"list element missing", `{"c":[{"name":"a"}]}`, `{"c":[{"name":"a"},{"name":"b"}]}`, false},
		{"type mismatch", `{"a":"1"}`, `{"a":1}`, false},
		{"atomic list extended", `{"args":["a","b","c"]}`, `{"args":["a","b"]}`, false},
		{"atomic list reordered", `{"args":["b","a"]}`, `{"args":["a","b"]}`, false},
		{"atomic list shortened", `{"args":["a"]}`, `{"args":["a","b"]}`, false},
		{"atomic list equal", `{"args":["a","b"]}`, `{"args":["a","b"]}`, true},
		{"scalar list with a duplicate", `{"args":["a","a"]}`, `{"args":["a"]}`, false},
		{"keyless objects extended", `{"s":[{"x":1},{"x":2}]}`, `{"s":[{"x":1}]}`, false},
		{"keyless objects reordered", `{"s":[{"x":2},{"x":1}]}`, `{"s":[{"x":1},{"x":2}]}`, false},
		{"keyless objects with defaults", `{"s":[{"x":1,"d":0}]}`, `{"s":[{"x":1}]}`, true},
		{"associative list reordered", `{"c":[{"name":"b"},{"name":"a"}]}`, `{"c":[{"name":"a"},{"name":"b"}]}`, true},
		{"ports keyed by number", `{"p":[{"containerPort":53,"protocol":"UDP"},{"containerPort":80,"protocol":"TCP"}]}`, `{"p":[{"containerPort":80}]}`, true},
		{"port changed", `{"p":[{"containerPort":81,"protocol":"TCP"}]}`, `{"p":[{"containerPort":80}]}`, false},
		{"args of a container extended", `{"c":[{"name":"a","args":["x","y"]}]}`, `{"c":[{"name":"a","args":["x"]}]}`, false},
	} {
		if got := contains(decode(t, tc.live), decode(t, tc.want)); got != tc.ok {
			t.Errorf("%s: contains = %v, want %v", tc.name, got, tc.ok)
		}
	}
	// Numbers compare across the converter's int64 and encoding/json's float64.
	if !contains(map[string]any{"n": int64(3)}, map[string]any{"n": float64(3)}) {
		t.Error("int64 3 does not contain float64 3")
	}
}

func TestDropNullsDropsNullsOnly(t *testing.T) {
	// Empty objects stay: a volume's "emptyDir": {} means something.
	m := decode(t, `{"a":null,"b":{},"c":{"d":null,"e":{}},"f":[{"g":null,"h":1}],"i":[],"j":0,"k":""}`).(map[string]any)
	dropNulls(m)
	got, _ := json.Marshal(m)
	if want := `{"b":{},"c":{"e":{}},"f":[{"h":1}],"i":[],"j":0,"k":""}`; string(got) != want {
		t.Errorf("dropNulls = %s, want %s", got, want)
	}
}

func TestHashIsStable(t *testing.T) {
	a, _ := hashOf(decode(t, `{"x":1,"y":{"b":2,"a":1}}`).(map[string]any))
	b, _ := hashOf(decode(t, `{"y":{"a":1,"b":2},"x":1}`).(map[string]any))
	c, _ := hashOf(decode(t, `{"y":{"a":1,"b":3},"x":1}`).(map[string]any))
	if a != b || a == c || len(a) != 16 {
		t.Errorf("hashes %q %q %q: want equal for equal content, different otherwise, 16 hex digits", a, b, c)
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"converge-staticsite":          "converge-staticsite",
		"team/op:v1":                   "team_op_v1",
		"x" + string(make([]byte, 70)): "x" + string(make([]byte, 62)),
	} {
		got := labelValue(in)
		if len(got) > 63 || (len(in) < 63 && got != want) {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConditionsKeepTransitionTime(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 6, 1, 12, 0, 0, 500, time.UTC)
	current := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: then, Reason: "Old"},
		{Type: "Degraded", Status: metav1.ConditionFalse, LastTransitionTime: then},
		{Type: "Stale", Status: metav1.ConditionTrue, LastTransitionTime: then},
	}
	c := NewConditions(current, 7)
	c.now = func() time.Time { return now }
	got := c.True("Ready", "Applied", "ok").True("Degraded", "Broken", "x").Unknown("New", "Wait", "").List()
	if len(got) != 3 {
		t.Fatalf("got %d conditions, want 3 (unset ones dropped): %+v", len(got), got)
	}
	byType := map[string]metav1.Condition{}
	for _, cond := range got {
		byType[cond.Type] = cond
		if cond.ObservedGeneration != 7 {
			t.Errorf("%s: observedGeneration %d, want 7", cond.Type, cond.ObservedGeneration)
		}
	}
	if r := byType["Ready"]; !r.LastTransitionTime.Equal(&then) || r.Reason != "Applied" {
		t.Errorf("Ready kept its status: want the old transition time and the new reason, got %v %q", r.LastTransitionTime, r.Reason)
	}
	if d := byType["Degraded"]; !d.LastTransitionTime.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("Degraded changed status: want transition time now (to the second), got %v", d.LastTransitionTime)
	}
	if got[0].Type != "Degraded" || got[2].Type != "Ready" {
		t.Errorf("conditions not sorted by type: %v", []string{got[0].Type, got[1].Type, got[2].Type})
	}
}

func TestTypedNilChildIsAnError(t *testing.T) {
	d := &Declarative[*unstructured.Unstructured]{}
	for _, decl := range []any{nil, (*corev1.ConfigMap)(nil), (*unstructured.Unstructured)(nil), Adopt((*corev1.ConfigMap)(nil))} {
		if a, ok := decl.(adoption); ok {
			decl = a.child
		}
		if _, err := d.toUnstructured(decl); err == nil {
			t.Errorf("toUnstructured(%T(nil)) = nil error, want one", decl)
		}
	}
}

func TestOwnsNeedsProof(t *testing.T) {
	d := &Declarative[*unstructured.Unstructured]{opts: Options{FieldManager: "m"}}
	cm := func(ns, name string) string { return objectID(schema.GroupKind{Kind: "ConfigMap"}, ns, name) }
	ledger := formatLedger("parent", map[string]string{
		cm("other", "listed"): "listed", cm("", "listed"): "listed", cm("", "dropped"): "dropped", cm("", "claimed"): "?nonce",
	})
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "parent",
		Annotations: map[string]string{LedgerAnnotation: ledger}}}
	d.ledger.note("parent", map[string]string{cm("", "created"): "created", cm("", "dropped"): ""})
	ours := map[string]string{ParentUIDLabel: "parent", ManagerLabel: "m"}
	theirs := map[string]string{ParentUIDLabel: "another", ManagerLabel: "m"}
	ref := func(uid string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "X", Name: "x", UID: types.UID(uid), Controller: &controller}}
	}
	for _, tc := range []struct {
		name string
		obj  metav1.ObjectMeta
		want bool
	}{
		{"controller reference to the parent", metav1.ObjectMeta{Namespace: "ns", OwnerReferences: ref("parent", true)}, true},
		{"controller reference to another owner", metav1.ObjectMeta{Namespace: "ns", OwnerReferences: ref("other", true), Labels: ours}, false},
		{"a non-controller reference to the parent", metav1.ObjectMeta{Namespace: "ns", OwnerReferences: ref("parent", false)}, false},
		{"same namespace, labels only", metav1.ObjectMeta{Namespace: "ns", Labels: ours}, false},
		{"same namespace, listed in the ledger", metav1.ObjectMeta{Namespace: "ns", UID: "listed", Labels: ours}, false},
		{"other namespace, labels only", metav1.ObjectMeta{Namespace: "other", UID: "forged", Labels: ours}, false},
		{"cluster-scoped, labels only", metav1.ObjectMeta{UID: "forged", Labels: ours}, false},
		{"other namespace, listed in the annotation", metav1.ObjectMeta{Namespace: "other", UID: "listed", Labels: ours}, true},
		{"cluster-scoped, listed in the annotation", metav1.ObjectMeta{UID: "listed", Labels: ours}, true},
		{"cluster-scoped, listed, without the parent's label", metav1.ObjectMeta{UID: "listed"}, false},
		{"cluster-scoped, listed, labelled for another parent", metav1.ObjectMeta{UID: "listed", Labels: theirs}, false},
		{"cluster-scoped, created by this process", metav1.ObjectMeta{UID: "created", Labels: ours}, true},
		{"cluster-scoped, dropped from the ledger", metav1.ObjectMeta{UID: "dropped", Labels: ours}, false},
		{"cluster-scoped, created with the claim the ledger holds", metav1.ObjectMeta{UID: "new", Labels: ours, Annotations: map[string]string{ClaimAnnotation: "nonce"}}, true},
		{"cluster-scoped, with another claim", metav1.ObjectMeta{UID: "new", Labels: ours, Annotations: map[string]string{ClaimAnnotation: "guess"}}, false},
		{"cluster-scoped, listed, with another controller", metav1.ObjectMeta{UID: "listed", Labels: ours, OwnerReferences: ref("other", true)}, false},
		{"nothing", metav1.ObjectMeta{Namespace: "ns"}, false},
	} {
		if got := d.owns(parent, &corev1.ConfigMap{ObjectMeta: tc.obj}); got != tc.want {
			t.Errorf("%s: owns = %v, want %v", tc.name, got, tc.want)
		}
	}

	// A ledger copied onto another parent (its YAML applied under another
	// name) proves nothing there.
	copied := parent.DeepCopy()
	copied.Name, copied.UID = "copy", "copy"
	if d.owns(copied, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "listed", Labels: map[string]string{ParentUIDLabel: "copy"}}}) {
		t.Error("a ledger copied from another parent proves ownership")
	}

	// Once the annotation shows a write, the memory of it goes.
	shown := parent.DeepCopy()
	shown.Annotations[LedgerAnnotation] = formatLedger("parent", map[string]string{cm("other", "listed"): "listed", cm("", "created"): "created"})
	if !d.owns(shown, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "created", Labels: ours}}) {
		t.Error("a child the annotation lists is not owned")
	}
	if len(d.ledger.pending.byParent["parent"]) != 0 {
		t.Errorf("writes the annotation shows are still remembered: %v", d.ledger.pending.byParent)
	}
	d.ledger.note("parent", map[string]string{cm("", "late"): "late"})
	d.ledger.forget("parent")
	if d.owns(parent, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "late", Labels: ours}}) {
		t.Error("a forgotten parent still owns what its annotation does not list")
	}
}

// An object's UID in the ledger entry of one cluster does not make it the
// parent's where it is read as another cluster's: with namespaces as
// clusters, one API server is both, and the prune of the parent's own
// cluster would otherwise delete a child it holds in another.
func TestLedgerHoldsAnObjectOnlyInItsOwnCluster(t *testing.T) {
	var l ledger
	gk := schema.GroupKind{Kind: "ConfigMap"}
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	l.note("p", map[string]string{objectIn(gk, "team-a", "team-a", "page"): "u1", claimKey(objectIn(gk, "", "default", "local")): "?n1"})
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if !l.holds(parent, "team-a", child) {
		t.Error("the ledger does not hold team-a's child in team-a")
	}
	if l.holds(parent, "", child) {
		t.Error("the ledger holds team-a's child when it is read in the parent's own cluster")
	}
	claimed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "u2", Annotations: map[string]string{ClaimAnnotation: "n1"}}}
	if !l.holds(parent, "", claimed) || l.holds(parent, "team-a", claimed) {
		t.Error("a claim of the parent's own cluster is held in the wrong cluster")
	}
}

// TestLedgerKeepsOneEntryPerName: a child re-created (a new UID) replaces
// its entry, so the ledger does not grow with re-creations.
func TestLedgerKeepsOneEntryPerName(t *testing.T) {
	var l ledger
	id := objectID(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, "", "r")
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	for i := range 100 {
		l.note("p", map[string]string{id: fmt.Sprint("uid-", i)})
		parent.Annotations = map[string]string{LedgerAnnotation: formatLedger("p", l.recorded(parent))}
	}
	if got := parent.Annotations[LedgerAnnotation]; got != "p uid-99="+id {
		t.Errorf("ledger after 100 re-creations: %q", got)
	}
}

func TestConflictCondition(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "p", "generation": int64(4)},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": ChildConflictCondition, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
		}}},
	}}
	type status struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	}
	ready := status{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Applied"}}}
	got, err := withConflictCondition(parent, ready, ChildConflictReason, []string{"ConfigMap ns/a is taken", "Secret ns/b is taken"})
	if err != nil {
		t.Fatal(err)
	}
	conds := got.(map[string]any)["conditions"].([]any)
	if len(conds) != 2 {
		t.Fatalf("conditions %v: want Ready and %s", conds, ChildConflictCondition)
	}
	c := conds[1].(map[string]any)
	if c["type"] != ChildConflictCondition || c["status"] != "True" || c["reason"] != ChildConflictReason ||
		c["message"] != "ConfigMap ns/a is taken; Secret ns/b is taken" || c["observedGeneration"] != int64(4) ||
		c["lastTransitionTime"] != "2026-01-01T00:00:00Z" {
		t.Errorf("condition %v: want True, both notes, generation 4 and the current transition time", c)
	}
	// A status without conditions has no room known for one: unchanged.
	for _, s := range []any{status{}, map[string]any{"url": "x"}, "text"} {
		if got, err := withConflictCondition(parent, s, ChildConflictReason, []string{"x"}); err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("withConflictCondition(%#v) = %#v, %v; want it unchanged", s, got, err)
		}
	}
	// The unmodified cache object stays as it was.
	if n := len(parent.Object["status"].(map[string]any)["conditions"].([]any)); n != 1 {
		t.Errorf("the parent's conditions changed: %d", n)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789abc", 10, "0123456..."},
		{"ééééé", 8, "éé..."}, // never cuts a character in two
	} {
		if got := truncate(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
