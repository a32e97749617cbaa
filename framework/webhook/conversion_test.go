package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

func newConversion(t *testing.T, s *runtime.Scheme) *webhook.Conversion {
	t.Helper()
	c, err := webhook.NewConversion(s, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddHub(&testapi.Sprocket{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// convert posts a ConversionReview and returns its response, failing t
// unless the answer is 200 with the request's UID.
func convert(t *testing.T, h http.Handler, desired string, objects ...string) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := &apiextensionsv1.ConversionRequest{UID: "c-1", DesiredAPIVersion: desired}
	for _, o := range objects {
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	var out apiextensionsv1.ConversionReview
	exchange(t, h, apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"}, Request: req,
	}, &out)
	if out.Response == nil || out.Response.UID != "c-1" || out.Kind != "ConversionReview" {
		t.Fatalf("response is not a ConversionReview answering c-1: %+v", out)
	}
	return out.Response
}

const (
	v1Sprocket = `{"apiVersion":"sprockets.converge.dev/v1","kind":"Sprocket","metadata":{"name":"a","namespace":"ns","uid":"1","labels":{"l":"v"}},"spec":{"teeth":5,"color":"red"}}`
	v2Sprocket = `{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"b","namespace":"ns","uid":"2"},"spec":{"teeth":9,"paint":{"color":"green"}}}`
)

func TestConversion(t *testing.T) {
	c := newConversion(t, testScheme(t))
	if c.Path() != "/convert" {
		t.Errorf("Path() = %q", c.Path())
	}
	resp := convert(t, c, "sprockets.converge.dev/v2", v1Sprocket, v2Sprocket)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 {
		t.Fatalf("result %+v with %d objects, want success with 2", resp.Result, len(resp.ConvertedObjects))
	}
	var up testapi.Sprocket
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &up); err != nil {
		t.Fatal(err)
	}
	if up.APIVersion != "sprockets.converge.dev/v2" || up.Kind != "Sprocket" || up.Name != "a" || up.UID != "1" || up.Labels["l"] != "v" ||
		up.Spec.Teeth != 5 || up.Spec.Paint.Color != "red" {
		t.Errorf("v1 → v2 gave %+v", up)
	}
	if string(resp.ConvertedObjects[1].Raw) != v2Sprocket {
		t.Errorf("an object already at the desired version changed: %s", resp.ConvertedObjects[1].Raw)
	}

	resp = convert(t, c, "sprockets.converge.dev/v1", v2Sprocket)
	var down testapi.SprocketV1
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &down); err != nil {
		t.Fatal(err)
	}
	if down.APIVersion != "sprockets.converge.dev/v1" || down.Name != "b" || down.Spec.Teeth != 9 || down.Spec.Color != "green" {
		t.Errorf("v2 → v1 gave %+v", down)
	}
}

// sprocketV3 is a third version that converts through the hub, failing on
// purpose for 13 teeth and panicking for 666.
type sprocketV3 struct {
	testapi.SprocketV1
}

func (s *sprocketV3) ConvertTo(hub webhook.Hub) error { return s.SprocketV1.ConvertTo(hub) }
func (s *sprocketV3) ConvertFrom(hub webhook.Hub) error {
	switch hub.(*testapi.Sprocket).Spec.Teeth {
	case 13:
		return errors.New("13 teeth bring bad luck")
	case 666:
		panic("the devil's sprocket")
	}
	return s.SprocketV1.ConvertFrom(hub)
}
func (s *sprocketV3) DeepCopyObject() runtime.Object { c := *s; return &c }

// sprocketV4 does not convert.
type sprocketV4 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
}

func (s *sprocketV4) DeepCopyObject() runtime.Object { c := *s; return &c }

func TestConversionThroughTheHub(t *testing.T) {
	s := testScheme(t)
	s.AddKnownTypeWithName(testapi.V1.WithKind("Sprocket").GroupKind().WithVersion("v3"), &sprocketV3{})
	c := newConversion(t, s)
	resp := convert(t, c, "sprockets.converge.dev/v3", v1Sprocket)
	var v3 sprocketV3
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &v3); err != nil || v3.APIVersion != "sprockets.converge.dev/v3" || v3.Spec.Color != "red" || v3.Spec.Teeth != 5 {
		t.Errorf("v1 → v3 gave %+v (%v)", v3, err)
	}
	for _, tc := range []struct {
		name, desired, object, message string
	}{
		{"conversion error", "sprockets.converge.dev/v3", strings.Replace(v1Sprocket, `"teeth":5`, `"teeth":13`, 1),
			"objects[0]: Sprocket ns/a: convert from v1 to v3: from the hub v2: 13 teeth bring bad luck"},
		{"panic", "sprockets.converge.dev/v3", strings.Replace(v1Sprocket, `"teeth":5`, `"teeth":666`, 1),
			"objects[0]: Sprocket ns/a: conversion from v1 to v3 panicked: the devil's sprocket"},
		{"unknown kind", "sprockets.converge.dev/v2", `{"apiVersion":"sprockets.converge.dev/v1","kind":"Cog","metadata":{"name":"c"}}`,
			`objects[0]: Cog c: this webhook does not convert Cog.sprockets.converge.dev`},
		{"unknown version", "sprockets.converge.dev/v9", v1Sprocket, "objects[0]: Sprocket ns/a: version v9 is not in the scheme"},
		{"another group", "other.converge.dev/v2", v1Sprocket, "objects[0]: Sprocket ns/a: cannot convert Sprocket.sprockets.converge.dev to another group's version other.converge.dev/v2"},
		{"bad desired version", "a/b/c", v1Sprocket, `desiredAPIVersion "a/b/c" is not a group version`},
		{"not an object", "sprockets.converge.dev/v2", `[1]`, "objects[0]: not an object"},
		{"undecodable", "sprockets.converge.dev/v2", `{"apiVersion":"sprockets.converge.dev/v1","kind":"Sprocket","spec":{"teeth":"x"}}`, "objects[0]: Sprocket : decode as sprockets.converge.dev/v1, Kind=Sprocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := convert(t, c, tc.desired, tc.object)
			if resp.Result.Status != metav1.StatusFailure || !strings.HasPrefix(resp.Result.Message, tc.message) || len(resp.ConvertedObjects) != 0 {
				t.Errorf("result %+v with %d objects, want a failure %q and none", resp.Result, len(resp.ConvertedObjects), tc.message)
			}
		})
	}
}

func TestAddHubErrors(t *testing.T) {
	s := testScheme(t)
	s.AddKnownTypeWithName(testapi.V1.WithKind("Sprocket").GroupKind().WithVersion("v4"), &sprocketV4{})
	c, err := webhook.NewConversion(s, webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.AddHub(&testapi.Sprocket{})
	if err == nil || !strings.Contains(err.Error(), "version v4 (*webhook_test.sprocketV4) does not implement webhook.Convertible") {
		t.Errorf("AddHub with a spoke that does not convert: %v", err)
	}
	c = newConversion(t, testScheme(t))
	if err := c.AddHub(&testapi.Sprocket{}); err == nil || !strings.Contains(err.Error(), "Sprocket.sprockets.converge.dev already converts through v2") {
		t.Errorf("AddHub twice: %v", err)
	}
	if _, err := webhook.NewConversion(nil, webhook.HandlerOptions{}); err == nil {
		t.Error("NewConversion(nil scheme): no error")
	}
}

func TestConversionBadRequests(t *testing.T) {
	c := newConversion(t, testScheme(t))
	for _, tc := range []struct {
		name, body string
		code       int
		message    string
	}{
		{"not JSON", "x", 400, "request body is not a ConversionReview"},
		{"v1beta1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{}}`, 400, "want apiextensions.k8s.io/v1 ConversionReview"},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, 400, "ConversionReview without a request"},
	} {
		rec := post(c, "application/json", []byte(tc.body))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.message) {
			t.Errorf("%s: got %d %q, want %d with %q", tc.name, rec.Code, rec.Body, tc.code, tc.message)
		}
	}
}

// sprocketV5 converts its spec but not its metadata, and records in an
// annotation that it was converted.
type sprocketV5 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Teeth             int32 `json:"teeth"`
}

func (s *sprocketV5) ConvertTo(hub webhook.Hub) error {
	hub.(*testapi.Sprocket).Spec.Teeth = s.Teeth
	return nil
}
func (s *sprocketV5) ConvertFrom(hub webhook.Hub) error {
	s.Teeth = hub.(*testapi.Sprocket).Spec.Teeth
	s.Annotations = map[string]string{"converted": "yes"}
	return nil
}
func (s *sprocketV5) DeepCopyObject() runtime.Object { c := *s; return &c }

func TestConversionKeepsMetadata(t *testing.T) {
	s := testScheme(t)
	s.AddKnownTypeWithName(testapi.V1.WithKind("Sprocket").GroupKind().WithVersion("v5"), &sprocketV5{})
	c := newConversion(t, s)
	resp := convert(t, c, "sprockets.converge.dev/v5", v1Sprocket)
	var got sprocketV5
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "a" || got.Namespace != "ns" || got.UID != "1" || got.Labels["l"] != "v" || got.Annotations["converted"] != "yes" || got.Teeth != 5 {
		t.Errorf("v1 → v5 gave %+v, want the v1 metadata with the converter's annotation", got)
	}
}

// The hub is an example read for its type only: a nil one is refused
// naming the argument, a typed nil works as well as an empty object, and
// a type the scheme does not know is named.
func TestAddHubTakesAnExample(t *testing.T) {
	c, err := webhook.NewConversion(testScheme(t), webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddHub(nil); err == nil || !strings.Contains(err.Error(), "hub is nil") {
		t.Errorf("AddHub(nil): %v", err)
	}
	if err := c.AddHub((*testapi.Sprocket)(nil)); err != nil {
		t.Errorf("AddHub of a typed nil: %v", err)
	}
	c, err = webhook.NewConversion(runtime.NewScheme(), webhook.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddHub(&testapi.Sprocket{}); err == nil || !strings.Contains(err.Error(), "AddHub(*testapi.Sprocket): *testapi.Sprocket is not a kind registered in the scheme") {
		t.Errorf("AddHub of a kind the scheme does not know: %v", err)
	}
}
