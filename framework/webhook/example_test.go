package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

// review posts an AdmissionReview of a ConfigMap create to h, as the API
// server does, and returns the response.
func review(h http.Handler, configMap string) *admissionv1.AdmissionResponse {
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create,
			Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Object: runtime.RawExtension{Raw: []byte(configMap)},
		},
	})
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return out.Response
}

// A Defaulter changes its own copy of the object; the handler answers with
// the JSON patch of the change. (framework.AddWebhook serves it on the
// manager's webhook server.)
func ExampleDefaultingHandler() {
	scheme := clientgoscheme.Scheme
	h, err := webhook.DefaultingHandler(scheme, webhook.DefaulterFunc[*corev1.ConfigMap](func(_ context.Context, cm *corev1.ConfigMap) error {
		if cm.Labels["team"] == "" {
			if cm.Labels == nil {
				cm.Labels = map[string]string{}
			}
			cm.Labels["team"] = "platform"
		}
		return nil
	}), webhook.HandlerOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Path())
	resp := review(h, `{"metadata":{"name":"settings"},"data":{"a":"b"}}`)
	fmt.Println(resp.Allowed, string(resp.Patch))
	resp = review(h, `{"metadata":{"name":"settings","labels":{"team":"apps"}}}`)
	fmt.Println(resp.Allowed, resp.Patch == nil)
	// Output:
	// /mutate--v1-configmap
	// true [{"op":"add","path":"/metadata/labels","value":{"team":"platform"}}]
	// true true
}

// A Validator's error denies the request with its text; its warnings reach
// the client either way (kubectl prints them).
func ExampleValidatingHandler() {
	h, err := webhook.ValidatingHandler(clientgoscheme.Scheme, webhook.ValidatorFuncs[*corev1.ConfigMap]{
		Create: func(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
			var warnings webhook.Warnings
			if len(cm.Data) == 0 {
				warnings = append(warnings, "empty ConfigMap")
			}
			if cm.Immutable == nil {
				return warnings, errors.New("spell out immutable: true or false")
			}
			return warnings, nil
		},
	}, webhook.HandlerOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp := review(h, `{"metadata":{"name":"settings"}}`)
	fmt.Println(resp.Allowed, resp.Result.Code, resp.Result.Message, resp.Warnings)
	resp = review(h, `{"metadata":{"name":"settings"},"immutable":true,"data":{"a":"b"}}`)
	fmt.Println(resp.Allowed, resp.Warnings)
	// Output:
	// false 403 spell out immutable: true or false [empty ConfigMap]
	// true []
}

// Hub-and-spoke conversion: testapi's Sprocket v2 is the hub, and v1
// implements webhook.Convertible (ConvertTo and ConvertFrom the hub). One
// Conversion handler serves every kind added with AddHub on /convert.
func ExampleConversion_AddHub() {
	scheme := runtime.NewScheme()
	_ = testapi.AddToScheme(scheme)
	conv, err := webhook.NewConversion(scheme, webhook.HandlerOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := conv.AddHub(&testapi.Sprocket{}); err != nil {
		fmt.Println(err)
		return
	}
	body, _ := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "1", DesiredAPIVersion: "sprockets.converge.dev/v2", Objects: []runtime.RawExtension{
			{Raw: []byte(`{"apiVersion":"sprockets.converge.dev/v1","kind":"Sprocket","metadata":{"name":"s"},"spec":{"teeth":8,"color":"red"}}`)},
		}},
	})
	req := httptest.NewRequest(http.MethodPost, webhook.ConvertPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	conv.ServeHTTP(rec, req)
	var out apiextensionsv1.ConversionReview
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	var s testapi.Sprocket
	_ = json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &s)
	fmt.Println(out.Response.Result.Status, s.APIVersion, s.Spec.Teeth, s.Spec.Paint.Color)
	// Output:
	// Success sprockets.converge.dev/v2 8 red
}
