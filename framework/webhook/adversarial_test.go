package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

// podWithFutureFields is a Pod whose containers and tolerations carry
// fields the Go types do not know (as a newer API server sends them).
const podWithFutureFields = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},` +
	`"spec":{"containers":[{"name":"app","image":"app:1","future":{"x":1}},{"name":"log","image":"log:1","future":{"y":2}}],` +
	`"tolerations":[{"key":"a","operator":"Exists","future":true}]}}`

func TestDefaultingListsKeepUnknownFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    func(p *corev1.Pod)
		// want lists, per container, its name and whether it must still
		// carry its future field; tolerations likewise by key.
		containers  []string
		tolerations []string
	}{
		{"append a container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "s:1"})
		}, []string{"app future", "log future", "sidecar"}, []string{"a future"}},
		{"prepend a container and a toleration", func(p *corev1.Pod) {
			p.Spec.Containers = append([]corev1.Container{{Name: "init", Image: "i:1"}}, p.Spec.Containers...)
			p.Spec.Tolerations = append([]corev1.Toleration{{Key: "b", Operator: corev1.TolerationOpExists}}, p.Spec.Tolerations...)
		}, []string{"init", "app future", "log future"}, []string{"b", "a future"}},
		{"drop the first container", func(p *corev1.Pod) {
			p.Spec.Containers = p.Spec.Containers[1:]
		}, []string{"log future"}, []string{"a future"}},
		{"swap the containers", func(p *corev1.Pod) {
			p.Spec.Containers[0], p.Spec.Containers[1] = p.Spec.Containers[1], p.Spec.Containers[0]
		}, []string{"log future", "app future"}, []string{"a future"}},
		{"drop the last toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = nil
		}, []string{"app future", "log future"}, nil},
		{"append a container and change the first", func(p *corev1.Pod) {
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "s:1"})
		}, []string{"app future", "log future", "sidecar"}, []string{"a future"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := webhook.DefaultingHandler(testScheme(t), webhook.DefaulterFunc[*corev1.Pod](func(_ context.Context, p *corev1.Pod) error {
				tc.d(p)
				return nil
			}), webhook.HandlerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			resp := call(t, h, admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: []byte(podWithFutureFields)}})
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("decode patch %s: %v", resp.Patch, err)
			}
			got, err := p.Apply([]byte(podWithFutureFields))
			if err != nil {
				t.Fatalf("apply patch %s: %v", resp.Patch, err)
			}
			var pod struct {
				Spec struct {
					Containers  []map[string]any `json:"containers"`
					Tolerations []map[string]any `json:"tolerations"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(got, &pod); err != nil {
				t.Fatal(err)
			}
			describe := func(items []map[string]any, key string) []string {
				var out []string
				for _, it := range items {
					s, _ := it[key].(string)
					if it["future"] != nil {
						s += " future"
					}
					out = append(out, s)
				}
				return out
			}
			if c := describe(pod.Spec.Containers, "name"); strings.Join(c, ",") != strings.Join(tc.containers, ",") {
				t.Errorf("containers %q, want %q (patch %s)", c, tc.containers, resp.Patch)
			}
			if c := describe(pod.Spec.Tolerations, "key"); strings.Join(c, ",") != strings.Join(tc.tolerations, ",") {
				t.Errorf("tolerations %q, want %q (patch %s)", c, tc.tolerations, resp.Patch)
			}
		})
	}
}

// nilErr is an error type whose nil pointer is a typed nil error.
type nilErr struct{ msg string }

func (e *nilErr) Error() string { return e.msg }

func TestTypedNilErrorsAreNil(t *testing.T) {
	var none *nilErr
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(context.Context, *testapi.Sprocket) (webhook.Warnings, error) { return webhook.Warnings{"w"}, none },
	}
	vh, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp := call(t, vh, sprocketRequest(admissionv1.Create, `{"spec":{}}`, "")); !resp.Allowed || len(resp.Warnings) != 1 {
		t.Errorf("a Validator returning a nil *nilErr: %+v, want allowed with its warning", resp)
	}
	// A nil status error wrapped in another is an error (the wrapper is
	// not nil), denied with 403 since its status cannot be read.
	wrapped := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(context.Context, *testapi.Sprocket) (webhook.Warnings, error) {
			return nil, fmt.Errorf("wrapped: %w", (*apierrors.StatusError)(nil))
		},
	}
	wh, err := webhook.ValidatingHandler(testScheme(t), wrapped, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp := call(t, wh, sprocketRequest(admissionv1.Create, `{"spec":{}}`, "")); resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Errorf("a Validator returning a wrapped nil *StatusError: %+v, want a 403 denial", resp.Result)
	}
	d := webhook.DefaulterFunc[*testapi.Sprocket](func(_ context.Context, s *testapi.Sprocket) error {
		s.Spec.Teeth = 3
		return none
	})
	dh, err := webhook.DefaultingHandler(testScheme(t), d, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp := call(t, dh, sprocketRequest(admissionv1.Create, `{"spec":{}}`, "")); !resp.Allowed || resp.Patch == nil {
		t.Errorf("a Defaulter returning a nil *nilErr: %+v, want allowed with a patch", resp)
	}
}

// TestHandlerAnswersWithinTheRequestTimeout: the API server says how long
// it waits (the URL's timeout parameter); a Validator that ignores its
// context still gets an answer sent by then, and its context ends then.
func TestHandlerAnswersWithinTheRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	deadlines := make(chan bool, 1)
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(ctx context.Context, _ *testapi.Sprocket) (webhook.Warnings, error) {
			_, ok := ctx.Deadline()
			deadlines <- ok
			<-release // ignores ctx
			return nil, nil
		},
	}
	h, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := sprocketRequest(admissionv1.Create, `{"spec":{}}`, "")
	req.UID = "u-t"
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/x?timeout=100ms", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r) // returns only if the handler gives up on the Validator
	if !<-deadlines {
		t.Error("the Validator's context has no deadline")
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	if out.Response.UID != "u-t" || out.Response.Allowed || out.Response.Result.Code != http.StatusGatewayTimeout {
		t.Errorf("response %+v, want a 504 denial", out.Response)
	}
}

// sprocketV6 converts through the hub; its ConvertFrom returns a typed nil
// error, and for 77 teeth it signals started and then blocks until release
// closes, ignoring everything else.
type sprocketV6 struct {
	testapi.SprocketV1
}

var (
	v6Started = make(chan struct{}, 1)
	v6Release = make(chan struct{})
)

func (s *sprocketV6) ConvertTo(hub webhook.Hub) error { return s.SprocketV1.ConvertTo(hub) }
func (s *sprocketV6) ConvertFrom(hub webhook.Hub) error {
	if hub.(*testapi.Sprocket).Spec.Teeth == 77 {
		v6Started <- struct{}{}
		<-v6Release
	}
	if err := s.SprocketV1.ConvertFrom(hub); err != nil {
		return err
	}
	var none *nilErr
	return none
}
func (s *sprocketV6) DeepCopyObject() runtime.Object { c := *s; return &c }

func TestConversionTypedNilAndHang(t *testing.T) {
	s := testScheme(t)
	s.AddKnownTypeWithName(testapi.V1.WithKind("Sprocket").GroupKind().WithVersion("v6"), &sprocketV6{})
	c := newConversion(t, s)
	resp := convert(t, c, "sprockets.converge.dev/v6", v1Sprocket)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Errorf("a conversion returning a nil *nilErr: %+v, want success", resp.Result)
	}

	// The API server gives up (closes the connection): the handler answers
	// without waiting for the conversion.
	defer close(v6Release)
	rec := hangUp(t, c, v6Started, apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "c-2", DesiredAPIVersion: "sprockets.converge.dev/v6",
			Objects: []runtime.RawExtension{{Raw: []byte(strings.Replace(v1Sprocket, `"teeth":5`, `"teeth":77`, 1))}}},
	})
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Result.Status != metav1.StatusFailure ||
		!strings.Contains(out.Response.Result.Message, "did not answer in time") {
		t.Errorf("answer %d %s, want a failed conversion naming the timeout", rec.Code, rec.Body)
	}
}

// TestSubresourceOfAnotherKind: a rule that covers sprockets/* sends the
// scale subresource's Scale objects too; the Sprocket webhooks cannot
// judge them and let them through unchanged, while the status subresource
// (a Sprocket) is validated like the object.
func TestSubresourceOfAnotherKind(t *testing.T) {
	var calls []string
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Update: func(_ context.Context, _, s *testapi.Sprocket) (webhook.Warnings, error) {
			calls = append(calls, "update "+s.Name)
			return nil, nil
		},
	}
	vh, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dh, err := webhook.DefaultingHandler(testScheme(t), defaultSprocket, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale := sprocketRequest(admissionv1.Update, `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"s"},"spec":{"replicas":2}}`,
		`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"s"},"spec":{"replicas":1}}`)
	scale.Kind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	scale.SubResource = "scale"
	for name, h := range map[string]http.Handler{"validating": vh, "mutating": dh} {
		if resp := call(t, h, scale); !resp.Allowed || resp.Patch != nil {
			t.Errorf("%s: scale subresource: %+v, want allowed unchanged", name, resp)
		}
	}
	status := sprocketRequest(admissionv1.Update, `{"metadata":{"name":"s"}}`, `{"metadata":{"name":"s"}}`)
	status.SubResource = "status"
	if resp := call(t, vh, status); !resp.Allowed || len(calls) != 1 {
		t.Errorf("status subresource: %+v, calls %q, want validated once", resp, calls)
	}
}

// TestDecodingIsCaseSensitive: the API server and client-go read JSON keys
// case-sensitively, so must the handlers. A CRD that preserves unknown
// fields can store {"teeth":1000,"Teeth":5}: its teeth are 1000, and a
// Validator shown 5 would let 1000 teeth through.
func TestDecodingIsCaseSensitive(t *testing.T) {
	var seen int32
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(_ context.Context, s *testapi.Sprocket) (webhook.Warnings, error) {
			seen = s.Spec.Teeth
			return nil, nil
		},
	}
	h, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	call(t, h, sprocketRequest(admissionv1.Create, `{"spec":{"teeth":1000,"Teeth":5}}`, ""))
	if seen != 1000 {
		t.Errorf("the Validator saw %d teeth, want the 1000 the object holds", seen)
	}

	c := newConversion(t, testScheme(t))
	resp := convert(t, c, "sprockets.converge.dev/v2", strings.Replace(v1Sprocket, `"teeth":5`, `"teeth":1000,"Teeth":5`, 1))
	if resp.Result.Status != metav1.StatusSuccess || !strings.Contains(string(resp.ConvertedObjects[0].Raw), `"teeth":1000`) {
		t.Errorf("conversion: %+v %s, want teeth 1000", resp.Result, resp.ConvertedObjects)
	}
}

// TestConversionOfALargeList: kube-apiserver converts a whole list in one
// ConversionReview, however many items it has; a list of 8 MiB (as 2,000
// Sprockets of 4 KiB would be; here 16 of 512 KiB) must convert with the
// default limits, or reading the list at the other version fails.
func TestConversionOfALargeList(t *testing.T) {
	c := newConversion(t, testScheme(t))
	const items = 16
	note := strings.Repeat("n", 512<<10)
	objects := make([]string, items)
	for i := range objects {
		objects[i] = fmt.Sprintf(`{"apiVersion":"sprockets.converge.dev/v1","kind":"Sprocket","metadata":{"name":"s%d","annotations":{"note":%q}},"spec":{"teeth":%d}}`, i, note, i%100)
	}
	resp := convert(t, c, "sprockets.converge.dev/v2", objects...)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != items {
		t.Errorf("result %+v with %d objects, want success with %d", resp.Result, len(resp.ConvertedObjects), items)
	}
}

// TestHandlerAnswersWhenTheAPIServerHangsUp: without a timeout parameter,
// the request's own context (ended when the API server closes the
// connection) bounds a Validator that ignores it.
func TestHandlerAnswersWhenTheAPIServerHangsUp(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	v := webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(context.Context, *testapi.Sprocket) (webhook.Warnings, error) {
			started <- struct{}{}
			<-release
			return nil, nil
		},
	}
	h, err := webhook.ValidatingHandler(testScheme(t), v, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := sprocketRequest(admissionv1.Create, `{"spec":{}}`, "")
	rec := hangUp(t, h, started, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Allowed || out.Response.Result.Code != http.StatusGatewayTimeout {
		t.Errorf("answer %d %s, want a 504 denial", rec.Code, rec.Body)
	}
}

// hangUp posts review to h and cancels the request's context (the API
// server closing the connection) once started receives; it returns h's
// answer.
func hangUp(t *testing.T, h http.Handler, started <-chan struct{}, review any) *httptest.ResponseRecorder {
	t.Helper()
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { <-started; cancel() }()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/x", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}
