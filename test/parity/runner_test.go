package parity_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
)

// crdPath is the StaticSite CRD, given to both servers: a namespaced custom
// resource with a status subresource and status conditions keyed by type
// (x-kubernetes-list-type map).
const crdPath = "../../examples/staticsite/config/crd/example.converge.dev_staticsites.yaml"

// verb is what a step asks of the server.
type verb string

const (
	create      verb = "create"       // POST
	update      verb = "update"       // PUT
	apply       verb = "apply"        // server-side apply (PATCH application/apply-patch+yaml)
	applyStatus verb = "apply-status" // server-side apply to the status subresource
	del         verb = "delete"       // DELETE
	get         verb = "get"          // GET
)

// resource is a kind the table writes.
type resource struct {
	gvr        schema.GroupVersionResource
	apiVersion string
	kind       string
}

var (
	configMaps = resource{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), apiVersion: "v1", kind: "ConfigMap"}
	sites      = resource{gvr: v1alpha1.GroupVersion.WithResource("staticsites"), apiVersion: v1alpha1.GroupVersion.String(), kind: "StaticSite"}
)

// absent is the value of a field the object lacks.
const absent = "<none>"

// step is one request of a row and what it must get.
type step struct {
	verb verb
	res  resource
	// name is the object's name (for a create, the body's name wins).
	name string
	// body is the object sent by a create, update or apply, built from the
	// answers of the row's earlier steps; its namespace is set for it.
	body func(h *history) map[string]any
	// manager is the field manager of a write; force forces an apply.
	manager string
	force   bool
	// uid and rv, when set, are a delete's UID and resourceVersion
	// preconditions.
	uid func(h *history) types.UID
	rv  func(h *history) string
	want
}

// want is a step's expected outcome.
type want struct {
	// code is the HTTP status code, and reason the metav1.Status reason of a
	// failure ("" for a success).
	code   int
	reason metav1.StatusReason
	// message, when set, is part of a failure's message on both servers.
	message string
	// fields are paths into the returned object ("spec.image",
	// "status.conditions[].type" joins the elements' types with commas) and
	// their values: absent when missing, a value starting with "~" is a
	// regular expression the value must match.
	fields map[string]string
	// owners are paths into managedFields' fieldsV1 ("f:data/f:owned") and
	// the field managers owning them, sorted and joined with commas.
	owners map[string]string
	// managers, when set, are the object's managedFields entries as
	// "manager:Operation[:subresource]", sorted.
	managers []string
}

// row is one request sequence.
type row struct {
	name  string
	steps []step
}

// outcome is what a server answered to a step.
type outcome struct {
	code    int
	reason  metav1.StatusReason
	message string
	// obj is the object returned (nil for a failure or a delete).
	obj *unstructured.Unstructured
}

func (o outcome) String() string {
	if o.obj == nil && o.code >= 400 {
		return fmt.Sprintf("%d %s: %s", o.code, reasonString(o.reason), o.message)
	}
	return fmt.Sprint(o.code)
}

// reasonString names reason, "Unknown" for the empty reason of an error the
// server did not classify.
func reasonString(r metav1.StatusReason) string {
	if r == metav1.StatusReasonUnknown {
		return "Unknown"
	}
	return string(r)
}

// history is a row's outcomes so far, on one server.
type history struct{ outcomes []outcome }

// at returns the object step i got; it panics when it got none, a mistake
// of the table.
func (h *history) at(i int) *unstructured.Unstructured {
	if i >= len(h.outcomes) || h.outcomes[i].obj == nil {
		panic(fmt.Sprintf("the table uses the object of step %d, which returned none", i))
	}
	return h.outcomes[i].obj.DeepCopy()
}

// target is a server the table runs on.
type target struct {
	name string
	dyn  dynamic.Interface
	// codes records the status code of the last response.
	codes *lastCode
	// namespace returns a namespace of t's own on the server.
	namespace func(t *testing.T) string
}

// lastCode is a round tripper's record of the status code of the last
// response.
type lastCode struct {
	mu   sync.Mutex
	code int
}

func (l *lastCode) get() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.code
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newTarget returns a target on cfg, whose clients record the status code
// of each response; each row runs in a namespace of its own.
func newTarget(t *testing.T, name string, cfg *rest.Config) *target {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	namespace := func(t *testing.T) string { return testenv.Namespace(t, cs) }
	cfg = rest.CopyConfig(cfg)
	codes := &lastCode{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			codes.mu.Lock()
			codes.code = 0
			if err == nil {
				codes.code = resp.StatusCode
			}
			codes.mu.Unlock()
			return resp, err
		})
	})
	cfg.UserAgent = "parity"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &target{name: name, dyn: dyn, codes: codes, namespace: namespace}
}

// do sends s, in namespace ns, after the steps of h.
func (tg *target) do(ctx context.Context, ns string, s step, h *history) outcome {
	ri := tg.dyn.Resource(s.res.gvr).Namespace(ns)
	var body *unstructured.Unstructured
	if s.body != nil {
		body = &unstructured.Unstructured{Object: s.body(h)}
		body.SetAPIVersion(s.res.apiVersion)
		body.SetKind(s.res.kind)
		body.SetNamespace(ns)
		if body.GetName() == "" && body.GetGenerateName() == "" {
			body.SetName(s.name)
		}
	}
	var (
		obj *unstructured.Unstructured
		err error
	)
	switch s.verb {
	case create:
		obj, err = ri.Create(ctx, body, metav1.CreateOptions{FieldManager: s.manager})
	case update:
		obj, err = ri.Update(ctx, body, metav1.UpdateOptions{FieldManager: s.manager})
	case apply:
		obj, err = ri.Apply(ctx, s.name, body, metav1.ApplyOptions{FieldManager: s.manager, Force: s.force})
	case applyStatus:
		obj, err = ri.ApplyStatus(ctx, s.name, body, metav1.ApplyOptions{FieldManager: s.manager, Force: s.force})
	case del:
		opts := metav1.DeleteOptions{}
		if s.uid != nil || s.rv != nil {
			opts.Preconditions = &metav1.Preconditions{}
		}
		if s.uid != nil {
			uid := s.uid(h)
			opts.Preconditions.UID = &uid
		}
		if s.rv != nil {
			rv := s.rv(h)
			opts.Preconditions.ResourceVersion = &rv
		}
		err = ri.Delete(ctx, s.name, opts)
	case get:
		obj, err = ri.Get(ctx, s.name, metav1.GetOptions{})
	default:
		panic(fmt.Sprintf("unknown verb %q", s.verb))
	}
	o := outcome{code: tg.codes.get()}
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return outcome{code: -1, reason: "NoAPIStatus", message: err.Error()}
		}
		st := status.Status()
		o.reason, o.message = st.Reason, st.Message
		return o
	}
	o.obj = obj
	return o
}

// run runs r's steps on tg, in a namespace of the test's own, and returns
// each step's outcome.
func (tg *target) run(t *testing.T, r row) []outcome {
	t.Helper()
	ns := tg.namespace(t)
	h := &history{}
	for _, s := range r.steps {
		h.outcomes = append(h.outcomes, tg.do(t.Context(), ns, s, h))
	}
	return h.outcomes
}

// compare returns how the outcomes of one step, by server, depart from w
// and from each other: a code, a reason, a field or an owner that differs.
// Messages and patterns are checked against w only.
func compare(w want, got map[string]outcome) []string {
	var out []string
	servers := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	})
	for _, srv := range servers {
		for _, m := range mismatches(w, got[srv]) {
			out = append(out, srv+": "+m)
		}
	}
	for i, a := range servers {
		for _, b := range servers[i+1:] {
			for _, d := range disagreements(w, got[a], got[b]) {
				out = append(out, fmt.Sprintf("%s and %s disagree: %s", a, b, d))
			}
		}
	}
	return out
}

// mismatches returns how o departs from w.
func mismatches(w want, o outcome) []string {
	var out []string
	if o.code != w.code || o.reason != w.reason {
		out = append(out, fmt.Sprintf("got %s, want %d %s", o, w.code, reasonString(w.reason)))
	}
	if w.message != "" && !strings.Contains(o.message, w.message) {
		out = append(out, fmt.Sprintf("message %q lacks %q", o.message, w.message))
	}
	if o.obj == nil {
		if len(w.fields)+len(w.owners)+len(w.managers) > 0 {
			out = append(out, "no object returned, want its fields and owners checked")
		}
		return out
	}
	for _, p := range sortedKeys(w.fields) {
		v, want := fieldValue(o.obj.Object, p), w.fields[p]
		if re, ok := strings.CutPrefix(want, "~"); ok {
			if !regexp.MustCompile(re).MatchString(v) {
				out = append(out, fmt.Sprintf("field %s is %q, want it to match %s", p, v, re))
			}
		} else if v != want {
			out = append(out, fmt.Sprintf("field %s is %q, want %q", p, v, want))
		}
	}
	for _, p := range sortedKeys(w.owners) {
		if v := owners(o.obj, p); v != w.owners[p] {
			out = append(out, fmt.Sprintf("%s is owned by %q, want %q", p, v, w.owners[p]))
		}
	}
	if w.managers != nil {
		if m := managers(o.obj); !slices.Equal(m, w.managers) {
			out = append(out, fmt.Sprintf("managedFields %v, want %v", m, w.managers))
		}
	}
	return out
}

// disagreements returns how a and b differ in what w names.
func disagreements(w want, a, b outcome) []string {
	var out []string
	if a.code != b.code || a.reason != b.reason {
		out = append(out, fmt.Sprintf("%s vs %s", a, b))
	}
	if a.obj == nil || b.obj == nil {
		return out
	}
	for _, p := range sortedKeys(w.fields) {
		if strings.HasPrefix(w.fields[p], "~") {
			continue // a name generated, a timestamp: each is checked against w
		}
		if va, vb := fieldValue(a.obj.Object, p), fieldValue(b.obj.Object, p); va != vb {
			out = append(out, fmt.Sprintf("field %s: %q vs %q", p, va, vb))
		}
	}
	for _, p := range sortedKeys(w.owners) {
		if va, vb := owners(a.obj, p), owners(b.obj, p); va != vb {
			out = append(out, fmt.Sprintf("owners of %s: %q vs %q", p, va, vb))
		}
	}
	if w.managers != nil {
		if ma, mb := managers(a.obj), managers(b.obj); !slices.Equal(ma, mb) {
			out = append(out, fmt.Sprintf("managedFields %v vs %v", ma, mb))
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldValue renders the value at path (dot-separated; a segment ending in
// "[]" maps the rest of the path over a list's elements, joined with
// commas; a list of strings is joined the same way).
func fieldValue(obj any, path string) string {
	seg, rest, more := strings.Cut(path, ".")
	m, ok := obj.(map[string]any)
	if !ok {
		return absent
	}
	if name, isList := strings.CutSuffix(seg, "[]"); isList {
		items, ok := m[name].([]any)
		if !ok {
			return absent
		}
		vals := make([]string, len(items))
		for i, it := range items {
			vals[i] = fieldValue(it, rest)
		}
		return strings.Join(vals, ",")
	}
	v, ok := m[seg]
	if !ok || v == nil {
		return absent
	}
	if more {
		return fieldValue(v, rest)
	}
	switch v := v.(type) {
	case []any:
		vals := make([]string, len(v))
		for i, it := range v {
			vals[i] = fmt.Sprint(it)
		}
		return strings.Join(vals, ",")
	case map[string]any:
		b, _ := json.Marshal(v)
		return string(b)
	default:
		return fmt.Sprint(v)
	}
}

// owners returns the managers whose fieldsV1 hold path (keys separated by
// "/"), sorted and joined with commas.
func owners(obj *unstructured.Unstructured, path string) string {
	var names []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &set); err != nil {
			continue
		}
		var node any = set
		for _, key := range strings.Split(path, "/") {
			m, ok := node.(map[string]any)
			if !ok {
				node = nil
				break
			}
			node = m[key]
		}
		if node != nil {
			names = append(names, e.Manager)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// managers returns obj's managedFields entries as
// "manager:Operation[:subresource]", sorted.
func managers(obj *unstructured.Unstructured) []string {
	out := []string{}
	for _, e := range obj.GetManagedFields() {
		s := e.Manager + ":" + string(e.Operation)
		if e.Subresource != "" {
			s += ":" + e.Subresource
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// staticSiteCRD reads the CRD both servers are given.
func staticSiteCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// fakeTarget returns the fake API server, given the CRD as envtest is.
func fakeTarget(t *testing.T) *target {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	srv := fake.Start(t, fake.Options{Scheme: s, CRDs: []*apiextensionsv1.CustomResourceDefinition{staticSiteCRD(t)}})
	return newTarget(t, "fake", srv.Config())
}

var installCRD sync.Once

// realTarget returns the shared envtest control plane, with the CRD
// installed; each row gets a namespace of its own.
func realTarget(t *testing.T) *target {
	t.Helper()
	cfg := plane.Config(t)
	var err error
	installCRD.Do(func() {
		err = plane.Environment().InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{crdPath}})
	})
	if err != nil {
		t.Fatalf("install the StaticSite CRD: %v", err)
	}
	return newTarget(t, "kube-apiserver", cfg)
}
