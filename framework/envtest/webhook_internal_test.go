package envtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWebhookPoint(t *testing.T) {
	s := WebhookServing{Addr: "127.0.0.1:9999", CABundle: []byte("ca")}
	svcPath, url, badURL := "/validate-x", "https://elsewhere:443/mutate-y?q=1", "://"
	for _, tc := range []struct {
		name string
		cc   admissionregistrationv1.WebhookClientConfig
		want string
	}{
		{"service path", admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "svc", Namespace: "system", Path: &svcPath}, CABundle: []byte("old")}, "https://127.0.0.1:9999/validate-x"},
		{"service without path", admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "svc"}}, "https://127.0.0.1:9999/"},
		{"url", admissionregistrationv1.WebhookClientConfig{URL: &url}, "https://127.0.0.1:9999/mutate-y"},
		{"nothing", admissionregistrationv1.WebhookClientConfig{}, "https://127.0.0.1:9999/"},
	} {
		cc := tc.cc
		if err := s.point(&cc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cc.URL == nil || *cc.URL != tc.want || cc.Service != nil || string(cc.CABundle) != "ca" {
			t.Errorf("%s: got %+v, want url %s with the CA and no service", tc.name, cc, tc.want)
		}
	}
	if err := s.point(&admissionregistrationv1.WebhookClientConfig{URL: &badURL}); err == nil {
		t.Error("a bad URL was accepted")
	}
}

func TestWebhookOptionsLoad(t *testing.T) {
	dir := t.TempDir()
	manifests := `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: m
  resourceVersion: "12"
webhooks:
- name: m.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {service: {name: s, namespace: system, path: /mutate}}
---
# a comment-only document
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
- name: v.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {service: {name: s, namespace: system, path: /validate}}
`
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	typed := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "typed", UID: "u"}}
	m, v, err := WebhookOptions{Paths: []string{dir}, Validating: []admissionregistrationv1.ValidatingWebhookConfiguration{typed}}.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m[0].Name != "m" || m[0].ResourceVersion != "" || len(m[0].Webhooks) != 1 || *m[0].Webhooks[0].ClientConfig.Service.Path != "/mutate" {
		t.Errorf("mutating: %+v", m)
	}
	if len(v) != 2 || v[0].Name != "v" || v[1].Name != "typed" || v[1].UID != "" {
		t.Errorf("validating: %+v", v)
	}

	bad := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (WebhookOptions{Paths: []string{bad}}).load(); err == nil || !strings.Contains(err.Error(), "is not an admissionregistration.k8s.io/v1 MutatingWebhookConfiguration or ValidatingWebhookConfiguration") {
		t.Errorf("a CRD among webhook configurations: %v", err)
	}
}

func TestWebhookServingWait(t *testing.T) {
	s := WebhookServing{Addr: "127.0.0.1:1"}
	calls := 0
	if err := s.Wait(t.Context(), func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("Wait = %v after %d probes, want nil after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Wait(ctx, func(context.Context) error { return errors.New("webhook not called") })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "webhook not called") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Wait on a cancelled context = %v, want the context's error, the probe's and the address", err)
	}
}

// TestWebhookOptionsKeepSelectors: loading and pointing a configuration
// changes only its clientConfig; selectors, match conditions, policies and
// timeouts stay as written.
func TestWebhookOptionsKeepSelectors(t *testing.T) {
	dir := t.TempDir()
	manifest := `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: m}
webhooks:
- name: m.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {service: {name: s, namespace: system, path: /mutate}}
  namespaceSelector: {matchLabels: {team: a}}
  objectSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}
  matchConditions: [{name: not-system, expression: "!request.userInfo.username.startsWith('system:')"}]
  matchPolicy: Exact
  reinvocationPolicy: IfNeeded
  failurePolicy: Ignore
  timeoutSeconds: 3
`
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, err := WebhookOptions{Paths: []string{dir}}.load()
	if err != nil || len(m) != 1 || len(m[0].Webhooks) != 1 {
		t.Fatalf("load: %+v, %v", m, err)
	}
	w := m[0].Webhooks[0]
	if err := (WebhookServing{Addr: "127.0.0.1:9", CABundle: []byte("ca")}).point(&w.ClientConfig); err != nil {
		t.Fatal(err)
	}
	if w.NamespaceSelector == nil || w.NamespaceSelector.MatchLabels["team"] != "a" ||
		w.ObjectSelector == nil || len(w.ObjectSelector.MatchExpressions) != 1 ||
		len(w.MatchConditions) != 1 || w.MatchConditions[0].Name != "not-system" ||
		w.MatchPolicy == nil || *w.MatchPolicy != admissionregistrationv1.Exact ||
		w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy ||
		w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore ||
		w.TimeoutSeconds == nil || *w.TimeoutSeconds != 3 ||
		w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://127.0.0.1:9/mutate" {
		t.Errorf("after load and point: %+v", w)
	}
}
