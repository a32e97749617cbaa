package framework_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
	"github.com/converge-dev/converge/internal/testenv"
)

// unreachable is an API server that never answers: the manager's caches
// never sync, which the webhook server does not wait for.
var unreachable = &rest.Config{Host: "https://127.0.0.1:1"}

func sprocketScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), testapi.AddToScheme(s)); err != nil {
		t.Fatal(err)
	}
	return s
}

type sprocketDefaulter struct{}

func (*sprocketDefaulter) Default(_ context.Context, s *testapi.Sprocket) error {
	if s.Spec.Teeth == 0 {
		s.Spec.Teeth = 12
	}
	return nil
}

var sprocketValidator = webhook.ValidatorFuncs[*testapi.Sprocket]{
	Create: func(_ context.Context, s *testapi.Sprocket) (webhook.Warnings, error) {
		if s.Spec.Teeth > 100 {
			return nil, errors.New("too many teeth")
		}
		return nil, nil
	},
}

// TestWebhookServer serves a defaulter, a validator and a conversion over
// TLS before the caches have synced, reports readiness, and serves a
// rotated certificate without a restart.
func TestWebhookServer(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.WriteServingCert(t, dir, "first", time.Now().Add(time.Hour))
	mgr := testenv.NewManager(t, unreachable, framework.Options{
		Scheme:                 sprocketScheme(t),
		HealthProbeBindAddress: "127.0.0.1:0",
		Webhook:                framework.WebhookServerOptions{Addr: "127.0.0.1:0", CertDir: dir},
	})
	if err := framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Defaulter: &sprocketDefaulter{}, Validator: sprocketValidator}); err != nil {
		t.Fatal(err)
	}
	if err := framework.AddConversion(mgr, &testapi.Sprocket{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "the webhook and probe servers listen", func() bool { return mgr.WebhookAddress() != "" && mgr.HealthProbeAddress() != "" })
	addr := mgr.WebhookAddress()

	// A client that trusts ca only, with a new connection per request so
	// each one sees the certificate served now.
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func(path string, review any, out any) *tls.ConnectionState {
		t.Helper()
		body, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, b)
		}
		return resp.TLS
	}
	admission := func(obj string) admissionv1.AdmissionReview {
		return admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Group: testapi.Group, Version: "v2", Kind: "Sprocket"}, Object: runtime.RawExtension{Raw: []byte(obj)}},
		}
	}

	var mutated admissionv1.AdmissionReview
	post(webhook.MutatePath(testapi.V2.WithKind("Sprocket")), admission(`{"spec":{}}`), &mutated)
	if !mutated.Response.Allowed || string(mutated.Response.Patch) != `[{"op":"add","path":"/spec/teeth","value":12}]` {
		t.Errorf("mutate: %+v, want the teeth defaulted", mutated.Response)
	}
	var validated admissionv1.AdmissionReview
	post(webhook.ValidatePath(testapi.V2.WithKind("Sprocket")), admission(`{"spec":{"teeth":101}}`), &validated)
	if validated.Response.Allowed || validated.Response.Result.Message != "too many teeth" {
		t.Errorf("validate: %+v, want a denial", validated.Response)
	}
	var converted apiextensionsv1.ConversionReview
	post(webhook.ConvertPath, apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "c", DesiredAPIVersion: "sprockets.converge.dev/v1", Objects: []runtime.RawExtension{
			{Raw: []byte(`{"apiVersion":"sprockets.converge.dev/v2","kind":"Sprocket","metadata":{"name":"a"},"spec":{"paint":{"color":"red"}}}`)}}},
	}, &converted)
	if converted.Response.Result.Status != metav1.StatusSuccess || !strings.Contains(string(converted.Response.ConvertedObjects[0].Raw), `"color":"red"`) {
		t.Errorf("convert: %+v", converted.Response)
	}

	resp, err := http.Get("http://" + mgr.HealthProbeAddress() + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "[+]webhook-server ok") {
		t.Errorf("/readyz does not report the webhook server ready:\n%s", body)
	}

	// Rotation: the next connection is served the new certificate.
	ca2 := testenv.WriteServingCert(t, dir, "second", time.Now().Add(time.Hour))
	roots.AddCert(ca2)
	state := post(webhook.MutatePath(testapi.V2.WithKind("Sprocket")), admission(`{"spec":{"teeth":1}}`), &mutated)
	if cn := state.PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Errorf("after rotation the server presents %q, want second", cn)
	}
	// An expired certificate makes the server unready.
	testenv.WriteServingCert(t, dir, "expired", time.Now().Add(-time.Minute))
	resp, err = http.Get("http://" + mgr.HealthProbeAddress() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "[-]webhook-server failed: webhook certificate") {
		t.Errorf("/readyz with an expired certificate = %d:\n%s", resp.StatusCode, body)
	}

	if err := framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.SprocketV1]{Validator: webhook.ValidatorFuncs[*testapi.SprocketV1]{}}); err == nil || !strings.Contains(err.Error(), "before Manager.Start") {
		t.Errorf("AddWebhook after Start: %v", err)
	}
}

func TestWebhookRegistrationErrors(t *testing.T) {
	mgr := testenv.NewManager(t, unreachable, framework.Options{Scheme: sprocketScheme(t)})
	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"nothing to serve", "WebhookOptions sets neither Defaulter nor Validator",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{})},
		{"typed nil Defaulter", "AddWebhook[*testapi.Sprocket]: WebhookOptions.Defaulter: webhook: DefaultingHandler[*testapi.Sprocket]: the Defaulter is nil (*framework_test.sprocketDefaulter)",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Defaulter: (*sprocketDefaulter)(nil)})},
		{"nil DefaulterFunc", "WebhookOptions.Defaulter",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Defaulter: webhook.DefaulterFunc[*testapi.Sprocket](nil), Validator: sprocketValidator})},
		{"first registration", "",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Validator: sprocketValidator})},
		{"same kind twice", "a webhook for this kind and version is already registered on /validate-sprockets-converge-dev-v2-sprocket",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Validator: sprocketValidator})},
		{"another version of the kind", "",
			framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.SprocketV1]{Validator: webhook.ValidatorFuncs[*testapi.SprocketV1]{}})},
		{"conversion", "", framework.AddConversion(mgr, &testapi.Sprocket{})},
		{"conversion twice", "Sprocket.sprockets.converge.dev already converts through v2", framework.AddConversion(mgr, &testapi.Sprocket{})},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestWebhookServerNeedsItsCertificate: with a webhook registered and no
// certificate, Start fails at once naming the files; without webhooks, no
// server runs.
func TestWebhookServerNeedsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	mgr := testenv.NewManager(t, unreachable, framework.Options{Scheme: sprocketScheme(t), Webhook: framework.WebhookServerOptions{Addr: "127.0.0.1:0", CertDir: dir}})
	if err := framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Validator: sprocketValidator}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "webhook certificate from "+dir) {
		t.Errorf("Start without a certificate: %v", err)
	}

	idle := testenv.NewManager(t, unreachable, framework.Options{HealthProbeBindAddress: "127.0.0.1:0", Webhook: framework.WebhookServerOptions{CertDir: dir}})
	testenv.StartManager(t, idle)
	testenv.Eventually(t, "the probe server listens", func() bool { return idle.HealthProbeAddress() != "" })
	if addr := idle.WebhookAddress(); addr != "" {
		t.Errorf("a manager without webhooks serves them on %s", addr)
	}
}
