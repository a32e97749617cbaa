package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

// FuzzAdmission sends arbitrary bodies to a mutating and a validating
// webhook and a conversion webhook. Whatever the body, the handlers never
// panic, answer 200 only with a review that carries the request's UID, and
// refuse everything else with 400 or 413; a patch they return applies to the
// request's object. The seeds in testdata/fuzz/FuzzAdmission replay in
// every go test run.
func FuzzAdmission(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"sprockets.converge.dev","version":"v2","kind":"Sprocket"},"operation":"CREATE","object":{"spec":{}}}}`))
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"sprockets.converge.dev/v2","objects":[{"apiVersion":"sprockets.converge.dev/v1","kind":"Sprocket"}]}}`))
	f.Add([]byte(`{}`))
	s := testScheme(f)
	mutate, err := webhook.DefaultingHandler(s, defaultSprocket, webhook.HandlerOptions{MaxRequestBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	validate, err := webhook.ValidatingHandler(s, webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(_ context.Context, sp *testapi.Sprocket) (webhook.Warnings, error) {
			return webhook.Warnings{sp.Spec.Paint.Color}, nil
		},
	}, webhook.HandlerOptions{MaxRequestBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	conv, err := webhook.NewConversion(s, webhook.HandlerOptions{MaxRequestBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	if err := conv.AddHub(&testapi.Sprocket{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, h := range []webhook.Handler{mutate, validate} {
			rec := post(h, "application/json", body)
			switch rec.Code {
			case http.StatusOK:
				var in, out admissionv1.AdmissionReview
				if err := utiljson.Unmarshal(body, &in); err != nil || in.Request == nil {
					t.Fatalf("%s answered 200 to a body that is not a review (%v)", h.Path(), err)
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != in.Request.UID {
					t.Fatalf("%s: response is not a review answering %q (%v): %s", h.Path(), in.Request.UID, err, rec.Body)
				}
				if len(out.Response.Patch) > 0 {
					p, err := jsonpatch.DecodePatch(out.Response.Patch)
					if err != nil {
						t.Fatalf("patch %s does not decode: %v", out.Response.Patch, err)
					}
					if _, err := p.Apply(in.Request.Object.Raw); err != nil {
						t.Fatalf("patch %s does not apply to %s: %v", out.Response.Patch, in.Request.Object.Raw, err)
					}
				}
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			default:
				t.Fatalf("%s: status %d: %s", h.Path(), rec.Code, rec.Body)
			}
		}
		rec := post(conv, "application/json", body)
		switch rec.Code {
		case http.StatusOK:
			var in, out apiextensionsv1.ConversionReview
			if err := utiljson.Unmarshal(body, &in); err != nil || in.Request == nil {
				t.Fatalf("/convert answered 200 to a body that is not a review (%v)", err)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != in.Request.UID {
				t.Fatalf("/convert: response is not a review answering %q (%v): %s", in.Request.UID, err, rec.Body)
			}
			if out.Response.Result.Status == "Success" && len(out.Response.ConvertedObjects) != len(in.Request.Objects) {
				t.Fatalf("/convert: %d objects in, %d out", len(in.Request.Objects), len(out.Response.ConvertedObjects))
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("/convert: status %d: %s", rec.Code, rec.Body)
		}
	})
}
