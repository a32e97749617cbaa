package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/converge-dev/converge/framework/envtest"
)

// helmTool is the helm the tests render the generated chart with: built
// from the Go module proxy once by go run, and kept in Go's build cache.
const helmTool = "helm.sh/helm/v3/cmd/helm@v3.22.1"

// checkChart checks the project's Helm chart (dist/chart): helm lint finds
// no error, and helm template, for a release named as the project in its
// namespace, renders the objects make deploy applies (kubectl kustomize
// config/default, but the Namespace, which helm install --create-namespace
// makes): the same kinds and names, the same manager ClusterRole rules, the
// same webhooks and CRD conversions. With env, the API server accepts
// every object in a server-side dry run (cert-manager's kinds from
// stand-in CRDs).
func checkChart(t *testing.T, dir string, env *envtest.Environment) {
	t.Helper()
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", append([]string{"run", helmTool}, args...)...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	if out := helm("lint", "dist/chart"); !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint dist/chart:\n%s", out)
	}
	rendered := helm("template", "op", "dist/chart", "--namespace", "op-system")
	kubectl, err := envtest.FindBinary("kubectl", "")
	if err != nil {
		t.Fatal(err)
	}
	kustomized, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(dir, "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	chart, deploy := objectsByName(t, rendered), objectsByName(t, string(kustomized))
	delete(deploy, "Namespace/op-system")
	if got, want := sortedKeys(chart), sortedKeys(deploy); !slices.Equal(got, want) {
		t.Errorf("the chart renders\n  %s\nwhere make deploy applies\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, same := range []struct{ object, field string }{
		{"ClusterRole/op-manager-role", "rules"},
		{"Deployment/op-system/op-controller-manager", "spec.template.spec.containers"},
		{"MutatingWebhookConfiguration/op-mutating-webhook-configuration", "webhooks"},
		{"ValidatingWebhookConfiguration/op-validating-webhook-configuration", "webhooks"},
		{"CustomResourceDefinition/orders.shop.example.com", "spec"},
	} {
		a, b := chart[same.object], deploy[same.object]
		if a == nil || b == nil {
			continue // not in this project: compared above
		}
		fa, _, _ := unstructured.NestedFieldNoCopy(a.Object, strings.Split(same.field, ".")...)
		fb, _, _ := unstructured.NestedFieldNoCopy(b.Object, strings.Split(same.field, ".")...)
		if same.object == "Deployment/op-system/op-controller-manager" {
			// The image and its pull policy are the values' (make
			// deploy's image is IMG).
			fa, fb = containersWithout(fa, "image", "imagePullPolicy"), containersWithout(fb, "image", "imagePullPolicy")
		}
		if !reflect.DeepEqual(fa, fb) {
			t.Errorf("%s: the chart's %s differ from make deploy's:\nchart:  %v\ndeploy: %v", same.object, same.field, fa, fb)
		}
	}
	if env == nil {
		return
	}
	crds, err := filepath.Abs(filepath.Join("testdata", "certmanager", "crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(t.Context(), envtest.CRDOptions{Paths: []string{crds}}); err != nil {
		t.Fatal(err)
	}
	k := func(stdin string, args ...string) string {
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", env.KubeconfigPath()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	k("", "create", "namespace", "op-system")
	out := k(rendered, "apply", "--server-side", "--dry-run=server", "-f", "-")
	if n := strings.Count(out, "serverside-applied (server dry run)"); n != len(chart) {
		t.Errorf("the API server took %d of the chart's %d objects in a dry run:\n%s", n, len(chart), out)
	}
}

// objectsByName decodes YAML documents into objects keyed
// Kind/namespace/name (Kind/name when cluster-scoped).
func objectsByName(t *testing.T, docs string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, docs)
		}
		if u.Object == nil {
			continue
		}
		key := u.GetKind() + "/" + u.GetName()
		if u.GetNamespace() != "" {
			key = u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		}
		out[key] = &u
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// containersWithout returns a Deployment's containers without fields.
func containersWithout(containers any, fields ...string) any {
	list, _ := containers.([]any)
	out := make([]any, 0, len(list))
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		cp := map[string]any{}
		for k, v := range m {
			if !slices.Contains(fields, k) {
				cp[k] = v
			}
		}
		out = append(out, cp)
	}
	return out
}

// TestChartRendersOnItsOwn: the chart of a project with every kind of file
// renders with helm template before make manifests ever ran (no files/):
// only what needs controller-gen's output is missing.
func TestChartRendersOnItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helm, built from the Go module proxy by go run")
	}
	dir := t.TempDir()
	files, err := render(goldenProject(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "dist/chart/") {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.Content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.CommandContext(t.Context(), "go", "run", helmTool, "template", "op", filepath.Join(dir, "dist", "chart"), "--namespace", "op-system", "--set", "prometheus.enable=true,networkPolicy.enable=true").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objects := objectsByName(t, string(out))
	for _, want := range []string{"Deployment/op-system/op-controller-manager", "Service/op-system/op-webhook-service", "Certificate/op-system/op-serving-cert",
		"ServiceMonitor/op-system/op-controller-manager-metrics-monitor", "NetworkPolicy/op-system/op-allow-webhook-traffic", "ClusterRole/op-debug-reader"} {
		if objects[want] == nil {
			t.Errorf("helm template rendered no %s:\n%s", want, strings.Join(sortedKeys(objects), "\n"))
		}
	}
}
