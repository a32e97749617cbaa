package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mustContain reports each of wants that s lacks; what says what s is.
func mustContain(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(s, want) {
			t.Errorf("%s %q:\n%s", what, want, s)
		}
	}
}

// readFile returns the project file rel ("" when it does not exist).
func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// Webhooks are added part by part: defaulting, then validation for the same
// kind and version (one file), then conversion once a second version exists.
// Each run writes what it adds, and a re-run of the whole project changes
// nothing.
func TestCreateWebhook(t *testing.T) {
	dir := scaffoldFast(t)
	webhook := func(args ...string) string {
		t.Helper()
		return mustConverge(t, append([]string{"create", "webhook", "--group", "shop", "--kind", "Order", "--dir", dir, "--skip-generate"}, args...)...)
	}

	out := webhook("--version", "v1alpha1", "--defaulting")
	mustContain(t, "create webhook --defaulting output lacks", out,
		"create     internal/webhook/v1alpha1/order_webhook.go",
		"create     internal/controller/order_v1alpha1_webhook_test.go",
		"update     main.go",
		"update     internal/controller/suite_test.go",
		"update     config/default/kustomization.yaml",
		"update     Makefile",
		"create     config/webhook/service.yaml",
		"create     config/certmanager/certificate.yaml",
		"create     config/default/manager_webhook_patch.yaml")
	handler := readFile(t, dir, "internal/webhook/v1alpha1/order_webhook.go")
	if !strings.Contains(handler, "type OrderDefaulter struct{}") || strings.Contains(handler, "OrderValidator") {
		t.Errorf("order_webhook.go should have a defaulter only:\n%s", handler)
	}
	if main := readFile(t, dir, "main.go"); !strings.Contains(main, "webhookv1alpha1.SetupOrderWebhook(mgr)") {
		t.Errorf("main.go does not call SetupOrderWebhook:\n%s", main)
	}
	if mk := readFile(t, dir, "Makefile"); !strings.Contains(mk, " webhook paths=./... ") || !strings.Contains(mk, "output:webhook:artifacts:config=config/webhook") {
		t.Errorf("make manifests does not generate the webhook configurations:\n%s", mk)
	}

	// Validation joins the defaulter in the same file, which nobody changed.
	out = webhook("--version", "v1alpha1", "--validation")
	if !strings.Contains(out, "update     internal/webhook/v1alpha1/order_webhook.go") {
		t.Errorf("create webhook --validation did not update the handler:\n%s", out)
	}
	handler = readFile(t, dir, "internal/webhook/v1alpha1/order_webhook.go")
	mustContain(t, "order_webhook.go lacks", handler, "type OrderDefaulter struct{}", "type OrderValidator struct{}", "mutating=true", "mutating=false")

	// A second version of Order: its types, but no second controller.
	out = mustConverge(t, "create", "api", "--group", "shop", "--version", "v1", "--kind", "Order", "--dir", dir, "--skip-generate")
	if !strings.Contains(out, "create     api/shop/v1/order_types.go") || strings.Contains(out, "_controller") {
		t.Errorf("create api for a second version:\n%s", out)
	}
	if reg := readFile(t, dir, "internal/controller/controllers.go"); strings.Count(reg, "SetupOrderController,") != 1 {
		t.Errorf("controllers.go should list the Order controller once:\n%s", reg)
	}
	if crds := readFile(t, dir, "config/crd/kustomization.yaml"); strings.Count(crds, "shop.example.com_orders.yaml") != 1 {
		t.Errorf("config/crd lists the Order CRD more than once:\n%s", crds)
	}
	if types := readFile(t, dir, "api/shop/v1/order_types.go"); strings.Contains(types, "+kubebuilder:storageversion") {
		t.Errorf("v1 is not the first version of Order, yet it is the storage version")
	}
	if types := readFile(t, dir, "api/shop/v1alpha1/order_types.go"); !strings.Contains(types, "+kubebuilder:storageversion") {
		t.Errorf("v1alpha1, the first version of Order, is not the storage version")
	}

	out = webhook("--version", "v1", "--conversion", "--spoke", "v1alpha1")
	mustContain(t, "create webhook --conversion output lacks", out,
		"create     api/shop/v1/order_conversion.go",
		"create     api/shop/v1alpha1/order_conversion.go",
		"create     internal/webhook/v1/order_webhook.go",
		"create     config/default/orders_conversion_patch.yaml")
	if hub := readFile(t, dir, "api/shop/v1/order_conversion.go"); !strings.Contains(hub, "func (*Order) Hub() {}") {
		t.Errorf("the hub has no Hub method:\n%s", hub)
	}
	spoke := readFile(t, dir, "api/shop/v1alpha1/order_conversion.go")
	mustContain(t, "the spoke lacks", spoke, "func (src *Order) ConvertTo(hub webhook.Hub) error", "func (dst *Order) ConvertFrom(hub webhook.Hub) error", `shopv1 "example.com/team/op/api/shop/v1"`)
	if h := readFile(t, dir, "internal/webhook/v1/order_webhook.go"); !strings.Contains(h, "framework.AddConversion(mgr, &shopv1.Order{})") || strings.Contains(h, "AddWebhook") {
		t.Errorf("a conversion-only webhook file:\n%s", h)
	}
	if suite := readFile(t, dir, "internal/controller/suite_test.go"); !strings.Contains(suite, `"orders.shop.example.com",`) {
		t.Errorf("the suite does not install the conversion webhook of orders:\n%s", suite)
	}

	before := snapshot(t, dir)
	for _, args := range [][]string{
		{"init", "--module", "example.com/team/op"},
		{"create", "api", "--group", "shop", "--version", "v1", "--kind", "Order"},
	} {
		out := mustConverge(t, append(args, "--dir", dir, "--skip-generate")...)
		if !strings.Contains(out, " 0 created, 0 updated, 0 overwritten, ") {
			t.Errorf("converge %s changed files on a re-run:\n%s", strings.Join(args, " "), out)
		}
	}
	if after := snapshot(t, dir); len(after) != len(before) {
		t.Errorf("a re-run changed the number of files from %d to %d", len(before), len(after))
	}
}

// A main.go the user changed is kept, and the output says what to add.
func TestCreateWebhookKeptMain(t *testing.T) {
	dir := scaffoldFast(t)
	path := filepath.Join(dir, "main.go")
	mine := []byte("package main\n\n// My own main.\nfunc main() {}\n")
	if err := os.WriteFile(path, mine, 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustConverge(t, "create", "webhook", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--validation", "--dir", dir, "--skip-generate")
	if !strings.Contains(out, "main.go is yours (kept): call webhookv1alpha1.SetupOrderWebhook(mgr) in it, importing example.com/team/op/internal/webhook/v1alpha1") {
		t.Errorf("the output does not say how to register the webhook in a kept main.go:\n%s", out)
	}
	if got := readFile(t, dir, "main.go"); got != string(mine) {
		t.Errorf("main.go was overwritten without --force")
	}
}

// Bad create webhook command lines fail with a message naming the flag or
// the missing piece, and write nothing.
func TestCreateWebhookErrors(t *testing.T) {
	project := scaffoldFast(t)
	mustConverge(t, "create", "webhook", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--defaulting", "--dir", project, "--skip-generate")
	mustConverge(t, "create", "api", "--group", "shop", "--version", "v1", "--kind", "Order", "--dir", project, "--skip-generate")
	mustConverge(t, "create", "webhook", "--group", "shop", "--version", "v1", "--kind", "Order", "--conversion", "--spoke", "v1alpha1", "--dir", project, "--skip-generate")
	empty := t.TempDir()
	webhook := func(args ...string) []string {
		return append([]string{"create", "webhook", "--dir", project}, args...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no webhook type", webhook("--group", "shop", "--version", "v1", "--kind", "Order"), "no webhook to add: pass at least one of --defaulting, --validation and --conversion", 2},
		{"no group", webhook("--version", "v1", "--kind", "Order", "--validation"), "--group is required", 2},
		{"no version", webhook("--group", "shop", "--kind", "Order", "--validation"), "--version is required", 2},
		{"no kind", webhook("--group", "shop", "--version", "v1", "--validation"), "--kind is required", 2},
		{"bad kind", webhook("--group", "shop", "--version", "v1", "--kind", "order", "--validation"), `kind "order" does not start with an upper-case letter`, 2},
		{"spoke without conversion", webhook("--group", "shop", "--version", "v1", "--kind", "Order", "--validation", "--spoke", "v1alpha1"), "--spoke is only for --conversion", 2},
		{"conversion without spoke", webhook("--group", "shop", "--version", "v1", "--kind", "Order", "--conversion"), "--conversion needs --spoke: the versions of Order other than the hub v1", 2},
		{"spoke is the hub", webhook("--group", "shop", "--version", "v1", "--kind", "Order", "--conversion", "--spoke", "v1"), "--spoke v1 is the hub (--version)", 2},
		{"bad spoke", webhook("--group", "shop", "--version", "v1", "--kind", "Order", "--conversion", "--spoke", "1"), `--spoke "1": version "1" is invalid`, 2},
		{"built-in kind unknown", webhook("--group", "apps", "--version", "v1", "--kind", "Deploymnt", "--validation"), `apps/v1 has no kind "Deploymnt"; its kinds are: ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet`, 2},
		{"no such API", webhook("--group", "shop", "--version", "v1", "--kind", "Cart", "--validation"), "the project has no API shop.example.com/v1 Cart: create it first with converge create api --group shop --version v1 --kind Cart", 1},
		{"no such version", webhook("--group", "shop", "--version", "v2", "--kind", "Order", "--validation"), "the project has no API shop.example.com/v2 Order: create it first with converge create api --group shop --version v2 --kind Order (the project has Order at v1alpha1, v1)", 1},
		{"other group", webhook("--group", "sales", "--version", "v1", "--kind", "Order", "--validation"), "kind Order is in group shop.example.com, not sales.example.com", 1},
		{"no such spoke", webhook("--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--conversion", "--spoke", "v2"), "--spoke v2: the project has no API shop.example.com/v2 Order", 1},
		{"duplicate defaulting", webhook("--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--defaulting"), "Order shop.example.com/v1alpha1 already has a defaulting webhook (internal/webhook/v1alpha1/order_webhook.go): drop --defaulting", 1},
		{"duplicate conversion", webhook("--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--conversion", "--spoke", "v1"), "kind Order already has a conversion webhook (hub v1, spokes v1alpha1)", 1},
		{"not a project", []string{"create", "webhook", "--group", "shop", "--version", "v1", "--kind", "Order", "--validation", "--dir", empty}, "is not a converge project", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectRefused(t, project, empty, tc.args, tc.want, tc.code)
		})
	}
}

// A project written by a converge that knew manifest format 1 (no webhooks,
// one version per kind) or 2 (no cluster-scoped kinds, built-in webhooks or
// renamed controllers) takes webhooks; a newer format is refused.
func TestManifestFormats(t *testing.T) {
	dir := scaffoldFast(t)
	path := filepath.Join(dir, filepath.FromSlash(manifestPath))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2", "4"} {
		t.Run("format "+v, func(t *testing.T) {
			old := strings.Replace(string(b), `"version": 3,`, `"version": `+v+`,`, 1)
			if old == string(b) {
				t.Fatalf("the manifest does not start with format 3:\n%s", b)
			}
			if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := converge(t, "create", "webhook", "--group", "shop", "--version", "v1alpha1", "--kind", "Order", "--validation", "--dir", dir, "--skip-generate")
			if v == "4" {
				if code != 1 || !strings.Contains(errOut, "has format 4, newer than this converge understands (3)") {
					t.Errorf("format 4: exit %d\n%s", code, errOut)
				}
				return
			}
			if code != 0 {
				t.Fatalf("format %s refused: exit %d\n%s", v, code, errOut)
			}
			m, _, err := loadManifest(dir)
			if err != nil || m.Version != 3 || len(m.Project.Webhooks) != 1 {
				t.Errorf("the manifest after adding a webhook: format %d, webhooks %v, %v", m.Version, m.Project.Webhooks, err)
			}
		})
	}
}
