package parity_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestParity runs the table on the fake and on kube-apiserver, and fails on
// each step where either departs from the row's expectation or the two
// answer differently. With -short only the fake runs.
func TestParity(t *testing.T) {
	targets := []*target{fakeTarget(t)}
	if testing.Short() {
		t.Log("-short: the table runs on the fake only; without -short it also runs on a real control plane, and the two are compared")
	} else {
		targets = append(targets, realTarget(t))
	}
	for _, r := range table {
		t.Run(r.name, func(t *testing.T) {
			got := map[string][]outcome{}
			for _, tg := range targets {
				got[tg.name] = tg.run(t, r)
			}
			for i, s := range r.steps {
				step := map[string]outcome{}
				for name, outs := range got {
					step[name] = outs[i]
				}
				for _, m := range compare(s.want, step) {
					t.Errorf("step %d (%s): %s", i, describe(s), m)
				}
			}
		})
	}
}

// describe names a step: its verb, kind, name and manager.
func describe(s step) string {
	d := fmt.Sprintf("%s %s %s", s.verb, s.res.kind, s.name)
	if s.manager != "" {
		d += " by " + s.manager
	}
	if s.force {
		d += ", forced"
	}
	return strings.TrimSpace(d)
}

// The comparison reports a step whose outcome departs from the table, and
// two servers that disagree: the parity test cannot pass by comparing
// nothing.
func TestComparisonReportsMismatches(t *testing.T) {
	fk := fakeTarget(t)
	wrong := row{name: "second create of a name, expected to succeed", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
	}}
	outs := fk.run(t, wrong)
	if m := compare(wrong.steps[0].want, map[string]outcome{"fake": outs[0]}); len(m) != 0 {
		t.Fatalf("the first create: %v, want no mismatch", m)
	}
	m := compare(wrong.steps[1].want, map[string]outcome{"fake": outs[1]})
	if len(m) != 1 || !strings.Contains(m[0], "fake: got 409 AlreadyExists") || !strings.Contains(m[0], "want 201") {
		t.Errorf("a 409 against an expected 201: reported %q, want one mismatch naming both", m)
	}

	// Two servers agreeing with neither the table nor each other.
	other := outs[1]
	other.code, other.reason = 422, "Invalid"
	m = compare(wrong.steps[1].want, map[string]outcome{"fake": outs[1], "kube-apiserver": other})
	if !contains(m, "fake and kube-apiserver disagree: 409 AlreadyExists") {
		t.Errorf("servers answering 409 and 422: reported %q, want their disagreement", m)
	}

	// A field and an owner that differ.
	w := want{code: 200, fields: map[string]string{"data.k": "v"}, owners: map[string]string{"f:data/f:k": "writer"}}
	a := fk.do(t.Context(), outs[0].obj.GetNamespace(), step{verb: get, res: configMaps, name: "cm"}, &history{})
	b := outcome{code: a.code, obj: a.obj.DeepCopy()}
	b.obj.Object["data"] = map[string]any{"k": "changed"}
	b.obj.SetManagedFields(nil)
	m = compare(w, map[string]outcome{"fake": a, "other": b})
	for _, part := range []string{`other: field data.k is "changed", want "v"`, `other: f:data/f:k is owned by "", want "writer"`, `fake and other disagree: field data.k: "v" vs "changed"`, `fake and other disagree: owners of f:data/f:k: "writer" vs ""`} {
		if !contains(m, part) {
			t.Errorf("reported %q, want %q among them", m, part)
		}
	}
}

func contains(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}
