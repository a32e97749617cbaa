package parity_test

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// otherUID is a UID no object has.
const otherUID = "0b6f3ad2-5c1e-4a8e-9e55-2f7d8a4f1c11"

const finalizer = "parity.converge.dev/hold"

// Outcomes without an object.
var (
	ok          = want{code: http.StatusOK}
	created     = want{code: http.StatusCreated}
	notFound    = want{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound}
	conflict    = want{code: http.StatusConflict, reason: metav1.StatusReasonConflict}
	exists      = want{code: http.StatusConflict, reason: metav1.StatusReasonAlreadyExists}
	invalidWant = want{code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid}
)

// with returns w with message m.
func (w want) with(m string) want { w.message = m; return w }

// cm is a ConfigMap body with data k1, v1, k2, v2, ...
func cm(data ...string) func(*history) map[string]any {
	return func(*history) map[string]any { return cmBody(data...) }
}

func cmBody(data ...string) map[string]any {
	d := map[string]any{}
	for i := 0; i+1 < len(data); i += 2 {
		d[data[i]] = data[i+1]
	}
	return map[string]any{"data": d}
}

// site is a StaticSite body with spec.image image and the required pages.
func site(image string) func(*history) map[string]any {
	return func(*history) map[string]any { return siteBody(image) }
}

func siteBody(image string) map[string]any {
	return map[string]any{"spec": map[string]any{"image": image, "pages": map[string]any{"index.html": "<h1>hi</h1>"}}}
}

// withUID sets metadata.uid of body.
func withUID(body map[string]any, uid string) map[string]any {
	u := &unstructured.Unstructured{Object: body}
	u.SetUID(types.UID(uid))
	return u.Object
}

// conditions is a status body with one condition of status True per type.
func conditions(types ...string) func(*history) map[string]any {
	return func(*history) map[string]any { return conditionsWith("True", types...) }
}

func conditionsWith(status string, types ...string) map[string]any {
	conds := []any{}
	for _, typ := range types {
		conds = append(conds, map[string]any{"type": typ, "status": status, "reason": "Parity", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"})
	}
	return map[string]any{"status": map[string]any{"conditions": conds}}
}

// object returns step i's object, changed by edit.
func object(i int, edit func(u *unstructured.Unstructured)) func(*history) map[string]any {
	return func(h *history) map[string]any {
		u := h.at(i)
		u.SetManagedFields(nil)
		edit(u)
		return u.Object
	}
}

// cond is the fieldsV1 path of the condition of type typ.
func cond(typ string) string {
	return `f:status/f:conditions/k:{"type":"` + typ + `"}`
}

// table is the request sequences both servers must answer alike.
var table = []row{
	{name: "create of an existing name", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
		{verb: create, res: configMaps, name: "cm", body: cm("k", "again"), manager: "writer", want: exists.with(`"cm" already exists`)},
	}},
	{name: "update with a stale resourceVersion", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
		{verb: update, res: configMaps, name: "cm", body: object(0, func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "fresh"} }), manager: "writer", want: ok},
		{verb: update, res: configMaps, name: "cm", body: object(0, func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "stale"} }), manager: "writer",
			want: conflict.with("the object has been modified; please apply your changes to the latest version and try again")},
		{verb: get, res: configMaps, name: "cm", want: want{code: http.StatusOK, fields: map[string]string{"data.k": "fresh"}}},
	}},
	{name: "update naming another UID", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
		{verb: update, res: configMaps, name: "cm", body: object(0, func(u *unstructured.Unstructured) { u.SetUID(otherUID) }), manager: "writer",
			want: conflict.with("UID in precondition: " + otherUID)},
	}},
	{name: "custom resource update without a resourceVersion", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: update, res: sites, name: "s", body: object(0, func(u *unstructured.Unstructured) { u.SetResourceVersion("") }), manager: "writer",
			want: invalidWant.with("metadata.resourceVersion")},
	}},
	{name: "apply creating an object", steps: []step{
		{verb: apply, res: sites, name: "s", manager: "user", body: func(*history) map[string]any {
			b := siteBody("nginx")
			b["status"] = map[string]any{"url": "http://ignored"}
			return b
		}, want: want{code: http.StatusCreated,
			fields:   map[string]string{"spec.image": "nginx", "status.url": absent, "metadata.generation": "1"},
			owners:   map[string]string{"f:spec/f:image": "user", "f:status": ""},
			managers: []string{"user:Apply"}}},
	}},
	{name: "apply conflict between two managers without force", steps: []step{
		{verb: apply, res: configMaps, name: "cm", body: cm("owned", "by-a"), manager: "a", want: created},
		{verb: apply, res: configMaps, name: "cm", body: cm("owned", "by-b"), manager: "b", want: conflict.with(`conflict with "a": .data.owned`)},
		{verb: get, res: configMaps, name: "cm", want: want{code: http.StatusOK,
			fields: map[string]string{"data.owned": "by-a"}, owners: map[string]string{"f:data/f:owned": "a"}, managers: []string{"a:Apply"}}},
	}},
	{name: "apply conflict between two managers with force", steps: []step{
		{verb: apply, res: configMaps, name: "cm", body: cm("owned", "by-a", "a-only", "x"), manager: "a", want: created},
		{verb: apply, res: configMaps, name: "cm", body: cm("owned", "by-b"), manager: "b", force: true, want: want{code: http.StatusOK,
			fields:   map[string]string{"data.owned": "by-b", "data.a-only": "x"},
			owners:   map[string]string{"f:data/f:owned": "b", "f:data/f:a-only": "a"},
			managers: []string{"a:Apply", "b:Apply"}}},
	}},
	{name: "issue a - apply naming a UID no object has", steps: []step{
		{verb: apply, res: sites, name: "s", body: func(*history) map[string]any { return withUID(siteBody("nginx"), otherUID) }, manager: "m",
			want: conflict.with(otherUID)},
		{verb: get, res: sites, name: "s", want: notFound},
	}},
	{name: "issue b - apply naming another UID over an object", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: apply, res: sites, name: "s", body: func(*history) map[string]any { return withUID(siteBody("nginx"), otherUID) }, manager: "m",
			want: invalidWant.with("metadata.uid")},
		{verb: get, res: sites, name: "s", want: want{code: http.StatusOK, fields: map[string]string{"spec.image": "nginx"}, managers: []string{"writer:Update"}}},
	}},
	{name: "issue c - status conditions applied by two managers", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: applyStatus, res: sites, name: "s", body: conditions("Ready"), manager: "a", want: ok},
		{verb: applyStatus, res: sites, name: "s", body: conditions("Synced"), manager: "b", want: want{code: http.StatusOK,
			fields:   map[string]string{"status.conditions[].type": "Ready,Synced", "spec.image": "nginx"},
			owners:   map[string]string{cond("Ready"): "a", cond("Synced"): "b"},
			managers: []string{"a:Apply:status", "b:Apply:status", "writer:Update"}}},
	}},
	{name: "a map-type list of a custom resource owned by element", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: applyStatus, res: sites, name: "s", body: conditions("Ready", "Degraded"), manager: "a", want: ok},
		{verb: applyStatus, res: sites, name: "s", body: conditions("Synced"), manager: "b", want: ok},
		// b may not change a's element without force, names its key.
		{verb: applyStatus, res: sites, name: "s", body: func(*history) map[string]any { return conditionsWith("False", "Ready") }, manager: "b",
			want: conflict.with(`.status.conditions[type="Ready"].status`)},
		// a's next apply without Degraded removes it, and nothing of b's.
		{verb: applyStatus, res: sites, name: "s", body: conditions("Ready"), manager: "a", want: want{code: http.StatusOK,
			fields: map[string]string{"status.conditions[].type": "Ready,Synced", "status.conditions[].status": "True,True"},
			owners: map[string]string{cond("Ready"): "a", cond("Synced"): "b", cond("Degraded"): ""}}},
	}},
	{name: "status subresource apply does not touch the spec", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: applyStatus, res: sites, name: "s", body: func(*history) map[string]any {
			b := siteBody("ignored")
			b["status"] = map[string]any{"url": "http://s.ns.svc"}
			return b
		}, manager: "controller", want: want{code: http.StatusOK,
			fields:   map[string]string{"spec.image": "nginx", "status.url": "http://s.ns.svc", "metadata.generation": "1"},
			owners:   map[string]string{"f:status/f:url": "controller", "f:spec/f:image": "writer"},
			managers: []string{"controller:Apply:status", "writer:Update"}}},
	}},
	{name: "status apply of a missing object", steps: []step{
		{verb: applyStatus, res: sites, name: "missing", body: conditions("Ready"), manager: "a", want: notFound},
	}},
	{name: "delete of a missing object", steps: []step{
		{verb: del, res: configMaps, name: "missing", want: notFound.with(`"missing" not found`)},
	}},
	{name: "a UID precondition on delete", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: cm("k", "v"), manager: "writer", want: created},
		{verb: del, res: configMaps, name: "cm", uid: func(*history) types.UID { return otherUID }, want: conflict.with(`Operation cannot be fulfilled on ConfigMap "cm": the UID in the precondition (` + otherUID + ") does not match the UID in record")},
		{verb: get, res: configMaps, name: "cm", want: ok},
		{verb: del, res: configMaps, name: "cm", uid: func(h *history) types.UID { return h.at(0).GetUID() }, want: ok},
		{verb: get, res: configMaps, name: "cm", want: notFound},
	}},
	{name: "a stale resourceVersion precondition on delete", steps: []step{
		{verb: create, res: sites, name: "s", body: site("nginx"), manager: "writer", want: created},
		{verb: update, res: sites, name: "s", body: object(0, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "caddy", "spec", "image")
		}), manager: "writer", want: ok},
		{verb: del, res: sites, name: "s", rv: func(h *history) string { return h.at(0).GetResourceVersion() },
			want: conflict.with(`Operation cannot be fulfilled on StaticSite.example.converge.dev "s": the ResourceVersion in the precondition (`)},
		{verb: del, res: sites, name: "s", rv: func(h *history) string { return h.at(1).GetResourceVersion() }, want: ok},
		{verb: get, res: sites, name: "s", want: notFound},
	}},
	{name: "apply without a field manager", steps: []step{
		{verb: apply, res: configMaps, name: "cm", body: cm("k", "v"), want: invalidWant.with("fieldManager")},
		{verb: get, res: configMaps, name: "cm", want: notFound},
	}},
	{name: "delete of an object already being deleted", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: func(*history) map[string]any {
			b := cmBody("k", "v")
			b["metadata"] = map[string]any{"finalizers": []any{finalizer}}
			return b
		}, manager: "writer", want: created},
		{verb: del, res: configMaps, name: "cm", want: ok},
		{verb: get, res: configMaps, name: "cm", want: ok},
		{verb: del, res: configMaps, name: "cm", want: ok},
		{verb: get, res: configMaps, name: "cm", want: want{code: http.StatusOK, fields: map[string]string{"metadata.finalizers": finalizer, "metadata.resourceVersion": "~."}}},
	}},
	{name: "generateName create", steps: []step{
		{verb: create, res: configMaps, body: func(*history) map[string]any {
			b := cmBody("k", "v")
			b["metadata"] = map[string]any{"generateName": "gen-"}
			return b
		}, manager: "writer", want: want{code: http.StatusCreated,
			fields:   map[string]string{"metadata.name": "~^gen-[a-z0-9]{5}$", "metadata.generateName": "gen-", "data.k": "v"},
			managers: []string{"writer:Update"}}},
	}},
	{name: "a finalizer keeps an object in deletion", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: func(*history) map[string]any {
			b := cmBody("k", "v")
			b["metadata"] = map[string]any{"finalizers": []any{finalizer}}
			return b
		}, manager: "writer", want: created},
		{verb: del, res: configMaps, name: "cm", want: ok},
		{verb: get, res: configMaps, name: "cm", want: want{code: http.StatusOK,
			fields: map[string]string{"metadata.deletionTimestamp": "~^20", "metadata.finalizers": finalizer, "data.k": "v"}}},
		{verb: update, res: configMaps, name: "cm", body: object(2, func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }), manager: "writer", want: ok},
		{verb: get, res: configMaps, name: "cm", want: notFound},
	}},
	{name: "a finalizer cannot be added during deletion", steps: []step{
		{verb: create, res: sites, name: "s", body: func(*history) map[string]any {
			b := siteBody("nginx")
			b["metadata"] = map[string]any{"finalizers": []any{finalizer}}
			return b
		}, manager: "writer", want: created},
		{verb: del, res: sites, name: "s", want: ok},
		{verb: get, res: sites, name: "s", want: want{code: http.StatusOK, fields: map[string]string{"metadata.deletionTimestamp": "~^20", "metadata.generation": "2"}}},
		{verb: update, res: sites, name: "s", body: object(2, func(u *unstructured.Unstructured) { u.SetFinalizers([]string{finalizer, "parity.converge.dev/late"}) }), manager: "writer",
			want: invalidWant.with("no new finalizers can be added if the object is being deleted")},
		{verb: update, res: sites, name: "s", body: object(2, func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }), manager: "writer", want: ok},
		{verb: get, res: sites, name: "s", want: notFound},
	}},
	{name: "create naming a resourceVersion", steps: []step{
		{verb: create, res: configMaps, name: "cm", body: func(*history) map[string]any {
			b := cmBody("k", "v")
			b["metadata"] = map[string]any{"resourceVersion": "5"}
			return b
		}, manager: "writer", want: want{code: http.StatusInternalServerError, reason: metav1.StatusReasonUnknown, message: "resourceVersion should not be set on objects to be created"}},
		{verb: get, res: configMaps, name: "cm", want: notFound},
	}},
}
