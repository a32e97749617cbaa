package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/converge-dev/converge/framework/envtest"
)

// What controller-gen generates, reduced to what config/default's wiring
// touches: the test does not run controller-gen.
var generatedStubs = map[string]string{
	"config/rbac/role.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules: []
`,
	"config/crd/bases/shop.example.com_orders.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: orders.shop.example.com
spec:
  group: shop.example.com
  names: {kind: Order, plural: orders}
  scope: Namespaced
  versions: []
`,
	"config/webhook/manifests.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: morder-v1alpha1.shop.example.com
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-shop-example-com-v1alpha1-order}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: vorder-v1.shop.example.com
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-shop-example-com-v1-order}
`,
}

// config/default wires the webhooks as one piece once kustomize has renamed
// everything: the webhook configurations and the converting CRD call the
// Service that selects the manager's webhook port, the certificate is for
// that Service's name, its Secret is what the manager mounts where the
// framework reads it, and cert-manager injects that certificate's CA into
// every object that calls the webhooks.
func TestWebhookConfigWiring(t *testing.T) {
	kubectl, err := envtest.FindBinary("kubectl", "")
	if err != nil {
		t.Skipf("kubectl, which runs kustomize, is not available: %v", err)
	}
	dir := scaffoldFast(t)
	for _, args := range [][]string{
		{"webhook", "--version", "v1alpha1", "--defaulting"},
		{"api", "--version", "v1"},
		{"webhook", "--version", "v1", "--validation", "--conversion", "--spoke", "v1alpha1"},
	} {
		mustConverge(t, append([]string{"create", args[0], "--group", "shop", "--kind", "Order", "--dir", dir, "--skip-generate"}, args[1:]...)...)
	}
	for rel, content := range generatedStubs {
		if err := writeFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte(content), false); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), kubectl, "kustomize", "config/default")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, errText(err))
	}
	objs := map[string]*unstructured.Unstructured{} // by kind
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if k := u.GetKind(); k != "Service" || strings.Contains(u.GetName(), "webhook") {
			objs[k] = u
		}
	}
	get := func(kind string) *unstructured.Unstructured {
		t.Helper()
		u, ok := objs[kind]
		if !ok {
			t.Fatalf("config/default has no %s:\n%s", kind, out)
		}
		return u
	}
	str := func(u *unstructured.Unstructured, path ...string) string {
		t.Helper()
		s, _, err := unstructured.NestedString(u.Object, path...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	svc, cert, issuer, deploy, crd := get("Service"), get("Certificate"), get("Issuer"), get("Deployment"), get("CustomResourceDefinition")
	wantService := map[string]any{"name": svc.GetName(), "namespace": svc.GetNamespace()}
	if svc.GetName() != "op-webhook-service" || svc.GetNamespace() != "op-system" {
		t.Errorf("the webhook Service is %s/%s, want op-system/op-webhook-service", svc.GetNamespace(), svc.GetName())
	}
	injectFrom := cert.GetNamespace() + "/" + cert.GetName()
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		cfg := get(kind)
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			service, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
			delete(service, "path")
			if len(service) != 2 || service["name"] != wantService["name"] || service["namespace"] != wantService["namespace"] {
				t.Errorf("%s calls service %v, not the webhook Service %v", kind, service, wantService)
			}
		}
		if got := cfg.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != injectFrom {
			t.Errorf("%s: cert-manager.io/inject-ca-from = %q, want the Certificate %q", kind, got, injectFrom)
		}
	}
	if got := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != injectFrom {
		t.Errorf("the orders CRD: cert-manager.io/inject-ca-from = %q, want %q", got, injectFrom)
	}
	if s := str(crd, "spec", "conversion", "strategy"); s != "Webhook" {
		t.Errorf("the orders CRD converts with strategy %q, want Webhook", s)
	}
	if n, ns, p := str(crd, "spec", "conversion", "webhook", "clientConfig", "service", "name"), str(crd, "spec", "conversion", "webhook", "clientConfig", "service", "namespace"), str(crd, "spec", "conversion", "webhook", "clientConfig", "service", "path"); n != svc.GetName() || ns != svc.GetNamespace() || p != "/convert" {
		t.Errorf("the orders CRD converts through %s/%s%s, want %s/%s/convert", ns, n, p, svc.GetNamespace(), svc.GetName())
	}

	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := svc.GetName() + "." + svc.GetNamespace() + ".svc"; !slices.Contains(dns, want) {
		t.Errorf("the Certificate is for %v, not for the Service's %s", dns, want)
	}
	if ref := str(cert, "spec", "issuerRef", "name"); ref != issuer.GetName() {
		t.Errorf("the Certificate's issuer is %q, the Issuer is %q", ref, issuer.GetName())
	}

	// The manager mounts the Certificate's Secret where the framework reads
	// it by default, and the Service targets the port it serves on.
	secret := str(cert, "spec", "secretName")
	volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	var volume string
	for _, v := range volumes {
		if s, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); s == secret {
			volume, _, _ = unstructured.NestedString(v.(map[string]any), "name")
		}
	}
	if volume == "" {
		t.Fatalf("the Deployment mounts no volume of Secret %s: %v", secret, volumes)
	}
	manager := containers[0].(map[string]any)
	mounts, _, _ := unstructured.NestedSlice(manager, "volumeMounts")
	if !slices.ContainsFunc(mounts, func(m any) bool {
		mm := m.(map[string]any)
		return mm["name"] == volume && mm["mountPath"] == "/tmp/k8s-webhook-server/serving-certs"
	}) {
		t.Errorf("the manager does not mount %s at /tmp/k8s-webhook-server/serving-certs: %v", volume, mounts)
	}
	target, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	targetPort := target[0].(map[string]any)["targetPort"]
	ports, _, _ := unstructured.NestedSlice(manager, "ports")
	if !slices.ContainsFunc(ports, func(p any) bool {
		pm := p.(map[string]any)
		return pm["name"] == targetPort && fmt.Sprint(pm["containerPort"]) == "9443"
	}) {
		t.Errorf("the Service targets port %v, which is not the manager's containerPort 9443: %v", targetPort, ports)
	}
}

// errText returns the standard error of a failed command.
func errText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
