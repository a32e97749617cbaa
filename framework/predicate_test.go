package framework_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
)

func cm(gen int64, rv string, labels, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "a", Generation: gen, ResourceVersion: rv, Labels: labels, Annotations: annotations,
	}}
}

func update(old, new *corev1.ConfigMap) framework.Change[*corev1.ConfigMap] {
	return framework.Change[*corev1.ConfigMap]{Type: framework.Updated, Old: old, Object: new}
}

func TestPredicates(t *testing.T) {
	base := cm(1, "10", map[string]string{"a": "1"}, map[string]string{"x": "1"})
	added := framework.Change[*corev1.ConfigMap]{Type: framework.Added, Object: base}
	deleted := framework.Change[*corev1.ConfigMap]{Type: framework.Deleted, Object: base}
	genBump := update(base, cm(2, "11", map[string]string{"a": "1"}, map[string]string{"x": "1"}))
	labelChange := update(base, cm(1, "11", map[string]string{"a": "2"}, map[string]string{"x": "1"}))
	annoChange := update(base, cm(1, "11", map[string]string{"a": "1"}, map[string]string{"x": "2"}))
	resync := update(base, base)

	type pred = framework.Predicate[*corev1.ConfigMap]
	for _, tc := range []struct {
		name string
		p    pred
		want map[string]bool
	}{
		{"GenerationChanged", framework.GenerationChanged[*corev1.ConfigMap],
			map[string]bool{"added": true, "deleted": true, "gen": true, "labels": false, "annotations": false, "resync": false}},
		{"LabelsChanged", framework.LabelsChanged[*corev1.ConfigMap],
			map[string]bool{"added": true, "deleted": true, "gen": false, "labels": true, "annotations": false, "resync": false}},
		{"AnnotationsChanged", framework.AnnotationsChanged[*corev1.ConfigMap],
			map[string]bool{"added": true, "deleted": true, "gen": false, "labels": false, "annotations": true, "resync": false}},
		{"ResourceVersionChanged", framework.ResourceVersionChanged[*corev1.ConfigMap],
			map[string]bool{"added": true, "deleted": true, "gen": true, "labels": true, "annotations": true, "resync": false}},
		{"Or(Generation, Labels)", framework.Or(framework.GenerationChanged[*corev1.ConfigMap], framework.LabelsChanged[*corev1.ConfigMap]),
			map[string]bool{"added": true, "deleted": true, "gen": true, "labels": true, "annotations": false, "resync": false}},
		// Not inverts the pass-through of non-update events too.
		{"And(ResourceVersion, Not(Generation))", framework.And(framework.ResourceVersionChanged[*corev1.ConfigMap], framework.Not(framework.GenerationChanged[*corev1.ConfigMap])),
			map[string]bool{"added": false, "deleted": false, "gen": false, "labels": true, "annotations": true, "resync": false}},
		{"And() accepts all", framework.And[*corev1.ConfigMap](),
			map[string]bool{"added": true, "deleted": true, "gen": true, "labels": true, "annotations": true, "resync": true}},
		{"Or() accepts none", framework.Or[*corev1.ConfigMap](),
			map[string]bool{"added": false, "deleted": false, "gen": false, "labels": false, "annotations": false, "resync": false}},
		{"custom", func(e framework.Change[*corev1.ConfigMap]) bool { return e.Type == framework.Deleted },
			map[string]bool{"added": false, "deleted": true, "gen": false, "labels": false, "annotations": false, "resync": false}},
	} {
		events := map[string]framework.Change[*corev1.ConfigMap]{
			"added": added, "deleted": deleted, "gen": genBump, "labels": labelChange, "annotations": annoChange, "resync": resync,
		}
		for name, e := range events {
			if got := tc.p(e); got != tc.want[name] {
				t.Errorf("%s on %s = %v, want %v", tc.name, name, got, tc.want[name])
			}
		}
	}
}

func TestLabelsMatch(t *testing.T) {
	team := cm(1, "1", map[string]string{"team": "web"}, nil)
	other := cm(1, "2", map[string]string{"team": "db"}, nil)
	none := cm(1, "3", nil, nil)
	type ev = framework.Change[*corev1.ConfigMap]
	p, err := framework.LabelSelectorMatch[*corev1.ConfigMap](metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		e    ev
		want bool
	}{
		{"added, selected", ev{Type: framework.Added, Object: team}, true},
		{"added, other value", ev{Type: framework.Added, Object: other}, false},
		{"added, no labels", ev{Type: framework.Added, Object: none}, false},
		{"deleted, selected", ev{Type: framework.Deleted, Object: team}, true},
		{"deleted, not selected", ev{Type: framework.Deleted, Object: other}, false},
		{"updated into the selection", update(other, team), true},
		{"updated out of the selection", update(team, other), true},
		{"updated outside the selection", update(other, none), false},
	} {
		if got := p(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	_, err = framework.LabelSelectorMatch[*corev1.ConfigMap](metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}})
	if err == nil || !strings.Contains(err.Error(), `"Near" is not a valid label selector operator`) {
		t.Errorf("invalid operator: err = %v, want one naming the operator", err)
	}
}
