package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

var sprocketV2 = testapi.V2.WithKind("Sprocket")

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := testapi.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// defaultSprocket gives a Sprocket 12 teeth and blue paint when unset.
var defaultSprocket = webhook.DefaulterFunc[*testapi.Sprocket](func(_ context.Context, s *testapi.Sprocket) error {
	if s.Spec.Teeth == 0 {
		s.Spec.Teeth = 12
	}
	if s.Spec.Paint.Color == "" {
		s.Spec.Paint.Color = "blue"
	}
	if s.Spec.Paint.Color == "invisible" {
		return errors.New("invisible paint is not sold")
	}
	return nil
})

// call posts an AdmissionReview holding req to h and returns the response,
// failing t unless the answer is 200 with the request's UID.
func call(t *testing.T, h http.Handler, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	if req.UID == "" {
		req.UID = "uid-1"
	}
	var out admissionv1.AdmissionReview
	exchange(t, h, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req,
	}, &out)
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != req.UID {
		t.Fatalf("response is not an AdmissionReview answering %q: %+v", req.UID, out)
	}
	return out.Response
}

// exchange posts review to h and decodes its answer into out, failing t
// unless the answer is 200 with a JSON body.
func exchange(t *testing.T, h http.Handler, review, out any) {
	t.Helper()
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	rec := post(h, "application/json", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("decode response: %v: %s", err, rec.Body)
	}
}

func post(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func sprocketRequest(op admissionv1.Operation, obj, old string) admissionv1.AdmissionRequest {
	req := admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Group: testapi.Group, Version: "v2", Kind: "Sprocket"},
		Resource: metav1.GroupVersionResource{Group: testapi.Group, Version: "v2", Resource: "sprockets"},
		Name:     "s", Namespace: "ns", Operation: op,
	}
	if obj != "" {
		req.Object.Raw = []byte(obj)
	}
	if old != "" {
		req.OldObject.Raw = []byte(old)
	}
	return req
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		gvk              schema.GroupVersionKind
		mutate, validate string
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "/mutate--v1-pod", "/validate--v1-pod"},
		{sprocketV2, "/mutate-sprockets-converge-dev-v2-sprocket", "/validate-sprockets-converge-dev-v2-sprocket"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "/mutate-apps-v1-statefulset", "/validate-apps-v1-statefulset"},
	} {
		if got := webhook.MutatePath(tc.gvk); got != tc.mutate {
			t.Errorf("MutatePath(%v) = %q, want %q", tc.gvk, got, tc.mutate)
		}
		if got := webhook.ValidatePath(tc.gvk); got != tc.validate {
			t.Errorf("ValidatePath(%v) = %q, want %q", tc.gvk, got, tc.validate)
		}
	}
}

func TestDefaultingPatch(t *testing.T) {
	h, err := webhook.DefaultingHandler(testScheme(t), defaultSprocket, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Path() != "/mutate-sprockets-converge-dev-v2-sprocket" {
		t.Errorf("Path() = %q", h.Path())
	}
	for _, tc := range []struct {
		name   string
		op     admissionv1.Operation
		object string
		// want is the object after the patch; "" means no patch.
		want string
	}{
		{"defaults on create", admissionv1.Create,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s","namespace":"ns"}}`,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s","namespace":"ns"},"spec":{"teeth":12,"paint":{"color":"blue"}}}`},
		{"only the unset field", admissionv1.Update,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s"},"spec":{"teeth":7}}`,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s"},"spec":{"teeth":7,"paint":{"color":"blue"}}}`},
		{"fields the type does not know stay", admissionv1.Create,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s","labels":{"a/b~c":"x"}},"spec":{"future":{"x":1},"paint":{"gloss":true}},"status":{"ok":true}}`,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s","labels":{"a/b~c":"x"}},"spec":{"future":{"x":1},"teeth":12,"paint":{"gloss":true,"color":"blue"}},"status":{"ok":true}}`},
		{"no patch when nothing changes", admissionv1.Create,
			`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"s"},"spec":{"teeth":3,"paint":{"color":"red"}}}`, ""},
		{"deletes are left alone", admissionv1.Delete, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := sprocketRequest(tc.op, tc.object, "")
			if tc.op == admissionv1.Delete {
				req.OldObject.Raw = []byte(`{"metadata":{"name":"s"}}`)
			}
			resp := call(t, h, req)
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if tc.want == "" {
				if resp.Patch != nil || resp.PatchType != nil {
					t.Fatalf("patch %s, want none", resp.Patch)
				}
				return
			}
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("decode patch %s: %v", resp.Patch, err)
			}
			got, err := p.Apply([]byte(tc.object))
			if err != nil {
				t.Fatalf("apply patch %s: %v", resp.Patch, err)
			}
			if !jsonpatch.Equal(got, []byte(tc.want)) {
				t.Errorf("patch %s gives\n%s\nwant\n%s", resp.Patch, got, tc.want)
			}
		})
	}
}

func TestDefaulterErrorDenies(t *testing.T) {
	h, err := webhook.DefaultingHandler(testScheme(t), defaultSprocket, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := call(t, h, sprocketRequest(admissionv1.Create, `{"spec":{"paint":{"color":"invisible"}}}`, ""))
	if resp.Allowed || resp.Result == nil || resp.Result.Message != "invisible paint is not sold" || resp.Result.Code != http.StatusForbidden || resp.Patch != nil {
		t.Errorf("response %+v, want a 403 denial with the Defaulter's message and no patch", resp)
	}
}

func TestValidation(t *testing.T) {
	var seen []string
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(_ context.Context, s *testapi.Sprocket) (webhook.Warnings, error) {
			seen = append(seen, "create "+s.Spec.Paint.Color)
			switch s.Spec.Paint.Color {
			case "red":
				return webhook.Warnings{"red fades"}, nil
			case "green":
				return webhook.Warnings{"green is not a color"}, errors.New("green sprockets are not allowed")
			case "":
				return nil, apierrors.NewInvalid(sprocketV2.GroupKind(), s.Name, field.ErrorList{field.Required(field.NewPath("spec", "paint", "color"), "pick one")})
			}
			return nil, nil
		},
		Update: func(_ context.Context, old, s *testapi.Sprocket) (webhook.Warnings, error) {
			seen = append(seen, fmt.Sprintf("update %d→%d", old.Spec.Teeth, s.Spec.Teeth))
			if s.Spec.Teeth < old.Spec.Teeth {
				return nil, fmt.Errorf("teeth cannot shrink from %d to %d", old.Spec.Teeth, s.Spec.Teeth)
			}
			return nil, nil
		},
	}
	h, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		req      admissionv1.AdmissionRequest
		allowed  bool
		code     int32
		reason   metav1.StatusReason
		message  string
		warnings []string
		seen     string
	}{
		{"allowed", sprocketRequest(admissionv1.Create, `{"spec":{"paint":{"color":"blue"}}}`, ""), true, 0, "", "", nil, "create blue"},
		{"warning on allow", sprocketRequest(admissionv1.Create, `{"spec":{"paint":{"color":"red"}}}`, ""), true, 0, "", "", []string{"red fades"}, "create red"},
		{"denial keeps the message and the warnings", sprocketRequest(admissionv1.Create, `{"spec":{"paint":{"color":"green"}}}`, ""),
			false, 403, metav1.StatusReasonForbidden, "green sprockets are not allowed", []string{"green is not a color"}, "create green"},
		{"a StatusError keeps its code and reason", sprocketRequest(admissionv1.Create, `{"metadata":{"name":"s"}}`, ""),
			false, 422, metav1.StatusReasonInvalid, `Sprocket.sprockets.converge.dev "s" is invalid: spec.paint.color: Required value: pick one`, nil, "create "},
		{"update sees old and new", sprocketRequest(admissionv1.Update, `{"spec":{"teeth":3}}`, `{"spec":{"teeth":5}}`),
			false, 403, metav1.StatusReasonForbidden, "teeth cannot shrink from 5 to 3", nil, "update 5→3"},
		{"a nil Delete allows", sprocketRequest(admissionv1.Delete, "", `{"spec":{}}`), true, 0, "", "", nil, ""},
		{"connect is allowed", sprocketRequest(admissionv1.Connect, "", ""), true, 0, "", "", nil, ""},
		{"another kind is refused", func() admissionv1.AdmissionRequest {
			r := sprocketRequest(admissionv1.Create, `{}`, "")
			r.Kind.Version = "v1"
			return r
		}(), false, 400, metav1.StatusReasonBadRequest, "this webhook (/validate-sprockets-converge-dev-v2-sprocket) serves sprockets.converge.dev/v2, Kind=Sprocket, not sprockets.converge.dev/v1, Kind=Sprocket", nil, ""},
		{"a create without object", sprocketRequest(admissionv1.Create, "", ""), false, 400, metav1.StatusReasonBadRequest, "CREATE request for Sprocket without object", nil, ""},
		{"an update without oldObject", sprocketRequest(admissionv1.Update, `{}`, ""), false, 400, metav1.StatusReasonBadRequest, "UPDATE request for Sprocket without oldObject", nil, ""},
		{"an object that does not decode", sprocketRequest(admissionv1.Create, `{"spec":{"teeth":"many"}}`, ""), false, 400, metav1.StatusReasonBadRequest, "decode object as sprockets.converge.dev/v2, Kind=Sprocket: ", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			resp := call(t, h, tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && (resp.Result == nil || resp.Result.Code != tc.code || resp.Result.Reason != tc.reason || !strings.HasPrefix(resp.Result.Message, tc.message)) {
				t.Errorf("result %+v, want code %d reason %s message %q", resp.Result, tc.code, tc.reason, tc.message)
			}
			if !slices.Equal(resp.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.warnings)
			}
			if want := strings.Fields(tc.seen); (len(want) == 0) != (len(seen) == 0) || (len(seen) > 0 && seen[0] != tc.seen) {
				t.Errorf("validator saw %q, want %q", seen, tc.seen)
			}
		})
	}
}

func TestRequestFromContext(t *testing.T) {
	var got *admissionv1.AdmissionRequest
	d := webhook.DefaulterFunc[*corev1.ConfigMap](func(ctx context.Context, _ *corev1.ConfigMap) error {
		got, _ = webhook.RequestFromContext(ctx)
		return nil
	})
	h, err := webhook.DefaultingHandler(testScheme(t), d, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := admissionv1.AdmissionRequest{UID: types.UID("u-7"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{}`)}}
	call(t, h, req)
	if got == nil || got.UID != "u-7" {
		t.Errorf("RequestFromContext gave %+v, want the request u-7", got)
	}
	if _, ok := webhook.RequestFromContext(t.Context()); ok {
		t.Error("RequestFromContext outside a handler reported a request")
	}
}

func TestPanicDenies(t *testing.T) {
	d := webhook.DefaulterFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) error { panic("boom") })
	h, err := webhook.DefaultingHandler(testScheme(t), d, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := call(t, h, admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{}`)}})
	if resp.Allowed || resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, "panicked: boom") {
		t.Errorf("response %+v, want a 500 denial naming the panic", resp.Result)
	}
}

type nilDefaulter struct{}

func (*nilDefaulter) Default(context.Context, *corev1.Pod) error { return nil }

type notRegistered struct{ corev1.Pod }

func TestConstructorErrors(t *testing.T) {
	s := testScheme(t)
	for name, fn := range map[string]func() error{
		"typed nil Defaulter": func() error {
			_, err := webhook.DefaultingHandler[*corev1.Pod](s, (*nilDefaulter)(nil), webhook.HandlerOptions{})
			return err
		},
		"nil DefaulterFunc": func() error {
			_, err := webhook.DefaultingHandler[*corev1.Pod](s, webhook.DefaulterFunc[*corev1.Pod](nil), webhook.HandlerOptions{})
			return err
		},
		"nil Validator": func() error {
			_, err := webhook.ValidatingHandler[*corev1.Pod](s, nil, webhook.HandlerOptions{})
			return err
		},
		"type not in the scheme": func() error {
			_, err := webhook.ValidatingHandler[*notRegistered](s, webhook.ValidatorFuncs[*notRegistered]{}, webhook.HandlerOptions{})
			return err
		},
		"negative limit": func() error {
			_, err := webhook.ValidatingHandler[*corev1.Pod](s, webhook.ValidatorFuncs[*corev1.Pod]{}, webhook.HandlerOptions{MaxRequestBytes: -1})
			return err
		},
	} {
		if err := fn(); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestBadRequests(t *testing.T) {
	h, err := webhook.ValidatingHandler(testScheme(t), webhook.ValidatorFuncs[*testapi.Sprocket]{}, webhook.HandlerOptions{MaxRequestBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	good := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"sprockets.converge.dev","version":"v2","kind":"Sprocket"},"operation":"CREATE","object":{}}}`
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        string
		code        int
		message     string
	}{
		{"GET", http.MethodGet, "application/json", good, 405, "method GET not allowed"},
		{"YAML", http.MethodPost, "application/yaml", good, 415, `content type "application/yaml" not supported`},
		{"no content type", http.MethodPost, "", good, 415, `content type "" not supported`},
		{"JSON with a charset", http.MethodPost, "application/json; charset=utf-8", good, 200, ""},
		{"too large", http.MethodPost, "application/json", good[:len(good)-1] + strings.Repeat(" ", 1<<10) + "}", 413, "over the limit of 1024"},
		{"empty", http.MethodPost, "application/json", "", 400, "empty request body"},
		{"not JSON", http.MethodPost, "application/json", "{", 400, "request body is not an AdmissionReview"},
		{"v1beta1", http.MethodPost, "application/json", strings.Replace(good, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), 400, `request body is "admission.k8s.io/v1beta1" "AdmissionReview"`},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "AdmissionReview without a request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/x", strings.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.message) {
				t.Errorf("got %d %q, want %d with %q", rec.Code, rec.Body, tc.code, tc.message)
			}
		})
	}
}

// TestKindlessTypesRefused: an unstructured or metadata-only T has no kind
// for the scheme to give, and the error says so instead of a scheme error.
func TestKindlessTypesRefused(t *testing.T) {
	s := testScheme(t)
	_, uerr := webhook.ValidatingHandler[*unstructured.Unstructured](s, webhook.ValidatorFuncs[*unstructured.Unstructured]{}, webhook.HandlerOptions{})
	_, merr := webhook.DefaultingHandler[*metav1.PartialObjectMetadata](s, webhook.DefaulterFunc[*metav1.PartialObjectMetadata](func(context.Context, *metav1.PartialObjectMetadata) error { return nil }), webhook.HandlerOptions{})
	for _, err := range []error{uerr, merr} {
		if err == nil || !strings.Contains(err.Error(), "carries no kind of its own") {
			t.Errorf("error %v, want one saying the type carries no kind", err)
		}
	}
}
