package webhook_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework/webhook"
)

// gizmo is a custom resource whose Go type is older than its CRD: requests
// carry fields it does not know. Its spec and finish are omitzero, as
// kube-api-linter recommends.
type gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gizmoSpec `json:"spec,omitzero"`
}

type gizmoSpec struct {
	Size   int32  `json:"size,omitempty"`
	Finish finish `json:"finish,omitzero"`
	// Parts is a list without a key: no element has a name.
	Parts []part `json:"parts,omitempty"`
	// Backup's fields, and Windows', are not omitempty: T's encoding has
	// their zero values.
	Backup  *backup  `json:"backup,omitempty"`
	Windows []window `json:"windows,omitempty"`
}

type backup struct {
	Schedule  string `json:"schedule"`
	Retention int32  `json:"retention"`
	Window    window `json:"window"`
}

type window struct {
	Start string `json:"start"`
	Hours int32  `json:"hours"`
}

type finish struct {
	Color string `json:"color,omitempty"`
	// Coats is not omitempty: T's encoding of a finish it does not omit
	// has it.
	Coats int32 `json:"coats"`
}

type part struct {
	Kind  string `json:"kind,omitempty"`
	Count int32  `json:"count,omitempty"`
}

func (g *gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Parts = append([]part(nil), g.Spec.Parts...)
	out.Spec.Windows = append([]window(nil), g.Spec.Windows...)
	if g.Spec.Backup != nil {
		b := *g.Spec.Backup
		out.Spec.Backup = &b
	}
	return &out
}

var gizmoKind = schema.GroupVersionKind{Group: "gizmos.converge.dev", Version: "v1", Kind: "Gizmo"}

// defaulted returns the request's object raw once the patch of a
// defaulting webhook running d has been applied to it.
func defaulted(t *testing.T, d func(*gizmo), raw string) map[string]any {
	t.Helper()
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(gizmoKind, &gizmo{})
	h, err := webhook.DefaultingHandler(s, webhook.DefaulterFunc[*gizmo](func(_ context.Context, g *gizmo) error {
		d(g)
		return nil
	}), webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := call(t, h, admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind(gizmoKind), Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: []byte(raw)}})
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	got := []byte(raw)
	if len(resp.Patch) > 0 {
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("decode patch %s: %v", resp.Patch, err)
		}
		if got, err = p.Apply(got); err != nil {
			t.Fatalf("apply patch %s to %s: %v", resp.Patch, raw, err)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDefaultingKeepsUnknownFieldsOfOmitzeroStructs(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		d         func(*gizmo)
		want      string
	}{
		{"a spec of unknown fields only",
			`{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},"spec":{"future":1}}`,
			func(g *gizmo) { g.Spec.Size = 3 },
			`{"future":1,"size":3}`},
		{"a finish of unknown fields only",
			`{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},"spec":{"size":1,"finish":{"gloss":true}}}`,
			func(g *gizmo) { g.Spec.Finish.Color = "red" },
			`{"finish":{"color":"red","gloss":true},"size":1}`},
		{"a spec holding a finish of unknown fields only",
			`{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},"spec":{"finish":{"gloss":true}}}`,
			func(g *gizmo) { g.Spec.Finish.Color = "red" },
			`{"finish":{"color":"red","gloss":true}}`},
		{"an unknown field beside a finish of unknown fields only",
			`{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},"spec":{"future":[1],"finish":{"gloss":true}}}`,
			func(g *gizmo) { g.Spec.Size = 2 },
			`{"finish":{"gloss":true},"future":[1],"size":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(defaulted(t, tc.d, tc.raw)["spec"])
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("spec %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDefaultingNeverMovesUnknownFieldsInListsWithoutKeys: in a list
// without a key, an element the Defaulter changed keeps the fields T does
// not know when it kept all the values of one element of the request, or
// was changed in place in a list that kept its length and order, or is
// the element of the request most like it (each the other's closest, with
// at least as many values kept as changed); otherwise nothing says which
// element of the request it was, and it is built from T alone. Fields
// never move onto another element.
func TestDefaultingNeverMovesUnknownFieldsInListsWithoutKeys(t *testing.T) {
	const raw = `{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},` +
		`"spec":{"parts":[{"kind":"a","future":"A"},{"kind":"b","future":"B"},{"kind":"c","future":"C"}]}}`
	for _, tc := range []struct {
		name string
		d    func(*gizmo)
		want string // per part: kind, count when set, future when kept
	}{
		{"prepend a part and change another", func(g *gizmo) {
			g.Spec.Parts[0].Count = 1
			g.Spec.Parts = append([]part{{Kind: "z"}}, g.Spec.Parts...)
		}, "z a1A bB cC"},
		{"drop a part and change another", func(g *gizmo) {
			g.Spec.Parts[1].Count = 1
			g.Spec.Parts = g.Spec.Parts[1:]
		}, "b1B cC"},
		{"drop a part and change the one after", func(g *gizmo) {
			g.Spec.Parts[2].Count = 1
			g.Spec.Parts = append(g.Spec.Parts[:1:1], g.Spec.Parts[2])
		}, "aA c1C"},
		{"append a part and change the first", func(g *gizmo) {
			g.Spec.Parts[0].Count = 1
			g.Spec.Parts = append(g.Spec.Parts, part{Kind: "z"})
		}, "a1A bB cC z"},
		{"swap two parts and change the third", func(g *gizmo) {
			g.Spec.Parts[0], g.Spec.Parts[1] = g.Spec.Parts[1], g.Spec.Parts[0]
			g.Spec.Parts[2].Count = 1
		}, "bB aA c1C"},
		{"change every part in place", func(g *gizmo) {
			for i := range g.Spec.Parts {
				g.Spec.Parts[i].Count = int32(i + 1)
			}
		}, "a1A b2B c3C"},
		{"reverse the parts", func(g *gizmo) {
			p := g.Spec.Parts
			p[0], p[2] = p[2], p[0]
		}, "cC bB aA"},
		{"prepend a part and rename another", func(g *gizmo) {
			g.Spec.Parts[0].Kind = "x"
			g.Spec.Parts = append([]part{{Kind: "z"}}, g.Spec.Parts...)
		}, "z x bB cC"},
		{"rename a part in place", func(g *gizmo) {
			g.Spec.Parts[0].Kind = "x"
		}, "xA bB cC"},
		{"make two parts equal in place", func(g *gizmo) {
			g.Spec.Parts = []part{{Kind: "a", Count: 1}, {Kind: "a", Count: 1}, g.Spec.Parts[2]}
		}, "a1A a1B cC"},
		{"sort the parts and count one", func(g *gizmo) {
			g.Spec.Parts = []part{g.Spec.Parts[2], {Kind: "b", Count: 1}, g.Spec.Parts[0], {Kind: "z"}}
		}, "cC b1B aA z"},
		{"replace a part", func(g *gizmo) {
			g.Spec.Parts[1] = part{Kind: "z"}
			g.Spec.Parts[0], g.Spec.Parts[2] = g.Spec.Parts[2], g.Spec.Parts[0]
		}, "cC z aA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := defaulted(t, tc.d, raw)["spec"].(map[string]any)
			parts, _ := spec["parts"].([]any)
			var got []string
			for _, p := range parts {
				m := p.(map[string]any)
				s, _ := m["kind"].(string)
				if c, ok := m["count"].(float64); ok {
					s += strconv.Itoa(int(c))
				}
				if f, ok := m["future"].(string); ok {
					s += f
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("parts %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestDefaultingAddsNoZeroValues: what the Defaulter adds (a struct the
// request lacks, an element of a list) comes without the zero values T's
// encoding gives the fields it left unset, so the API server's structural
// defaults (applied after the mutating webhooks) still fill them. A zero
// value the Defaulter sets where the request has the field is written.
func TestDefaultingAddsNoZeroValues(t *testing.T) {
	const head = `{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"},`
	for _, tc := range []struct {
		name, raw string
		d         func(*gizmo)
		want      string
	}{
		{"a new struct", head + `"spec":{"size":1}}`,
			func(g *gizmo) { g.Spec.Backup = &backup{Schedule: "daily"} },
			`{"backup":{"schedule":"daily"},"size":1}`},
		{"a new struct holding a struct", head + `"spec":{"size":1}}`,
			func(g *gizmo) { g.Spec.Backup = &backup{Schedule: "daily", Window: window{Hours: 2}} },
			`{"backup":{"schedule":"daily","window":{"hours":2}},"size":1}`},
		{"a new struct left zero", head + `"spec":{"size":1}}`,
			func(g *gizmo) { g.Spec.Backup = &backup{} },
			`{"backup":{},"size":1}`},
		{"a new spec", `{"kind":"Gizmo","apiVersion":"gizmos.converge.dev/v1","metadata":{"name":"g"}}`,
			func(g *gizmo) { g.Spec.Backup = &backup{Retention: 7} },
			`{"backup":{"retention":7}}`},
		{"a new list element", head + `"spec":{"windows":[{"start":"01:00","hours":1,"future":true}]}}`,
			func(g *gizmo) { g.Spec.Windows = append(g.Spec.Windows, window{Start: "02:00"}) },
			`{"windows":[{"future":true,"hours":1,"start":"01:00"},{"start":"02:00"}]}`},
		{"a field set in an omitzero struct", head + `"spec":{"size":1}}`,
			func(g *gizmo) { g.Spec.Finish.Color = "red" },
			`{"finish":{"color":"red"},"size":1}`},
		{"a field of the request set to zero", head + `"spec":{"backup":{"schedule":"weekly","retention":3}}}`,
			func(g *gizmo) { g.Spec.Backup.Retention = 0; g.Spec.Backup.Window.Start = "03:00" },
			`{"backup":{"retention":0,"schedule":"weekly","window":{"start":"03:00"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(defaulted(t, tc.d, tc.raw)["spec"])
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("spec %s, want %s", got, tc.want)
			}
		})
	}
}
