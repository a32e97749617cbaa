package main

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"text/template"
	"unicode"
)

//go:embed all:templates
var templateFS embed.FS

// Versions the generated project pins. They match the framework's own
// go.mod (a test checks), so a generated project builds with the same
// dependencies converge is tested with.
const (
	goVersion            = "1.26.0"
	k8sVersion           = "v0.37.2"
	ginkgoVersion        = "v2.34.0"
	gomegaVersion        = "v1.44.0"
	controllerGenVersion = "v0.23.0"
	controllerGenPackage = "sigs.k8s.io/controller-tools/cmd/controller-gen"
	convergeModule       = "github.com/converge-dev/converge"
	// replacedVersion is the version go.mod requires when a replace
	// directive points at a local checkout: any version works, and this is
	// the one the go command itself writes for such requirements.
	replacedVersion = "v0.0.0-00010101000000-000000000000"
)

// controllerGenSteps are the controller-gen runs of make manifests for p,
// in order: deepcopy code first, so the packages type-check for the second
// run (CRDs from the api/ types, the manager's ClusterRole from the
// +kubebuilder:rbac markers and, once the project has admission webhooks,
// config/webhook/manifests.yaml from the +kubebuilder:webhook markers).
func controllerGenSteps(p Project) [][]string {
	second := []string{"rbac:roleName=manager-role", "crd"}
	if p.hasWebhooks(Webhook.Admission) {
		second = append(second, "webhook")
	}
	second = append(second, "paths=./...", "output:crd:artifacts:config=config/crd/bases", "output:rbac:artifacts:config=config/rbac")
	if p.hasWebhooks(Webhook.Admission) {
		second = append(second, "output:webhook:artifacts:config=config/webhook")
	}
	return [][]string{{"object:headerFile=" + boilerplatePath, "paths=./..."}, second}
}

// boilerplatePath holds the license header of the project's Go files, for
// controller-gen's generated code too.
const boilerplatePath = "hack/boilerplate.go.txt"

// licenseHeader starts every Go file converge writes: the Apache-2.0
// license, as the Kubernetes ecosystem uses, in its SPDX form.
func licenseHeader(p Project) string {
	return "// Copyright The " + p.Name + " Authors.\n// SPDX-License-Identifier: Apache-2.0\n"
}

// templateData is what every template sees.
type templateData struct {
	Project
	// R is the resource a per-resource template renders (zero otherwise).
	R Resource
	// Kinds are the resources of R's API group version (register.go).
	Kinds []Resource
	// APIs are the project's new API group versions, one resource each.
	APIs []Resource
	// Sample is R's test object, when converge knows one for a built-in kind.
	Sample *sample
	// W is the webhook a per-webhook template renders (zero otherwise); R
	// is then its resource, and Spokes the resources of its spoke versions.
	W      Webhook
	Spokes []Resource
	// Hub is the hub's resource when R is a spoke of a conversion webhook.
	Hub Resource
}

// HasBuiltin reports whether the project has a controller of a built-in
// kind, whose spec counts its reconciles with the suite's reconciles.
func (d templateData) HasBuiltin() bool {
	for _, r := range d.Resources {
		if r.Builtin {
			return true
		}
	}
	return false
}

// ExplainExample is what converge explain is given for the sample of the
// project's first API kind (Order default/order-sample), or placeholders.
func (d templateData) ExplainExample() string {
	crds := d.CRDs()
	if len(crds) == 0 {
		return "KIND NAMESPACE/NAME"
	}
	r := crds[0]
	if r.ClusterScoped {
		return r.Kind + " " + r.SampleName()
	}
	return r.Kind + " default/" + r.SampleName()
}

// CRDs returns the project's own API kinds, each once at its first version:
// one CRD each.
func (d templateData) CRDs() []Resource {
	var out []Resource
	for _, r := range d.Controllers() {
		if !r.Builtin {
			out = append(out, r)
		}
	}
	return out
}

// WebhookPackages are the webhook packages main.go imports.
func (d templateData) WebhookPackages() []Webhook { return d.webhookPackages() }

// AnyDefaulting reports whether the project has a defaulting webhook.
func (d templateData) AnyDefaulting() bool {
	return d.hasWebhooks(func(w Webhook) bool { return w.Defaulting })
}

// AnyValidation reports whether the project has a validating webhook.
func (d templateData) AnyValidation() bool {
	return d.hasWebhooks(func(w Webhook) bool { return w.Validation })
}

// AnyAdmission reports whether the project has a mutating or validating webhook.
func (d templateData) AnyAdmission() bool { return d.hasWebhooks(Webhook.Admission) }

// Conversions are the webhooks with conversion, each with its resource.
func (d templateData) Conversions() []Resource {
	var out []Resource
	for _, w := range d.Webhooks {
		if w.Conversion {
			r, _ := d.resourceAt(w.Group, w.Kind, w.Version)
			out = append(out, r)
		}
	}
	return out
}

// GoVersion is the go directive of the generated go.mod.
func (templateData) GoVersion() string { return goVersion }

// K8sVersion is the version of k8s.io/api, apimachinery and client-go.
func (templateData) K8sVersion() string { return k8sVersion }

// GinkgoVersion is the version of github.com/onsi/ginkgo/v2.
func (templateData) GinkgoVersion() string { return ginkgoVersion }

// GomegaVersion is the version of github.com/onsi/gomega.
func (templateData) GomegaVersion() string { return gomegaVersion }

// ControllerGen is the Makefile's command for controller-gen.
func (templateData) ControllerGen() string {
	return "$(GO) run " + controllerGenPackage + "@" + controllerGenVersion
}

// ControllerGenSteps are the arguments of each controller-gen run of make manifests.
func (d templateData) ControllerGenSteps() []string {
	steps := controllerGenSteps(d.Project)
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = strings.Join(s, " ")
	}
	return out
}

// ConvergeRequire is the version go.mod requires.
func (d templateData) ConvergeRequire() string {
	if d.Converge.Replace != "" {
		return replacedVersion
	}
	return d.Converge.Version
}

var funcs = template.FuncMap{
	// webhookName is the name of d's mutating ("m") or validating ("v")
	// webhook: a domain of three labels at least, as the API server wants.
	// A built-in kind's group is not the project's: the name is under the
	// project's domain.
	"webhookName": func(prefix string, d templateData) string {
		if d.W.Builtin {
			return prefix + d.R.Lower() + "-" + d.R.Version + "." + d.R.GroupOrCore() + "." + d.Domain
		}
		return prefix + d.R.Lower() + "-" + d.R.Version + "." + d.R.Group
	},
	"lower":     strings.ToLower,
	"dashes":    func(s string) string { return strings.ReplaceAll(s, ".", "-") },
	"varName":   varName,
	"join":      strings.Join,
	"lowerKind": func(r Resource) string { return lowerCamel(r.Kind) },
	"plural":    func(r Resource) string { return r.Plural },
	// objectMeta is the ObjectMeta of an object a spec makes, in namespace
	// ns; a cluster-scoped kind's has none, and its name starts with ns to
	// be unique to the spec. field is Name or GenerateName.
	"objectMeta": func(r Resource, field, name string) string {
		if r.ClusterScoped {
			return fmt.Sprintf("metav1.ObjectMeta{%s: ns + %q}", field, "-"+name)
		}
		return fmt.Sprintf("metav1.ObjectMeta{Namespace: ns, %s: %q}", field, name)
	},
	// objectName is the name objectMeta gives, as a Go expression.
	"objectName": func(r Resource, name string) string {
		if r.ClusterScoped {
			return fmt.Sprintf("ns + %q", "-"+name)
		}
		return fmt.Sprintf("%q", name)
	},
	// childNamespace is, as a Go expression in the specs, the namespace of
	// the example controller's ConfigMap for an object objectMeta made.
	"childNamespace": func(r Resource) string {
		if r.ClusterScoped {
			return "controller." + r.Ident() + "ChildNamespace"
		}
		return "ns"
	},
	// objectKey is the key of the object objectMeta names.
	"objectKey": func(r Resource, name string) string {
		if r.ClusterScoped {
			return fmt.Sprintf("types.NamespacedName{Name: ns + %q}", "-"+name)
		}
		return fmt.Sprintf("types.NamespacedName{Namespace: ns, Name: %q}", name)
	},
	"rbacGroup": func(g string) string {
		if g == "" {
			return `""`
		}
		return g
	},
}

// templates holds every template by its path under templates/ (base names
// repeat: several folders hold a kustomization.yaml.tmpl).
var templates = sync.OnceValue(func() map[string]*template.Template {
	out := map[string]*template.Template{}
	err := fs.WalkDir(templateFS, "templates", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := templateFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "templates/")
		if !strings.HasSuffix(name, ".tmpl") {
			return nil // a raw file
		}
		t := template.New(name).Funcs(funcs)
		if strings.HasPrefix(name, "chart/") {
			// Helm's templates are Go templates too: converge's actions
			// in them are [[ ]], and helm's {{ }} are left as they are.
			t = t.Delims("[[", "]]")
		}
		out[name] = template.Must(t.Parse(string(b)))
		return nil
	})
	if err != nil {
		panic(err) // the templates are embedded: a failure is a build defect
	}
	return out
})

// fileSpec says which template renders which file.
type fileSpec struct {
	tmpl       string // relative to templates/
	out        string // output path; may hold {{ }} on templateData
	executable bool
	createOnly bool
	// raw files are copied as they are, not executed as templates.
	raw bool
}

// projectFiles are rendered once per project.
var projectFiles = []fileSpec{
	{tmpl: "project/go.mod.tmpl", out: "go.mod", createOnly: true},
	{tmpl: "project/main.go.tmpl", out: "main.go"},
	{tmpl: "project/Makefile.tmpl", out: "Makefile"},
	{tmpl: "project/README.md.tmpl", out: "README.md"},
	{tmpl: "project/AGENTS.md.tmpl", out: "AGENTS.md"},
	{tmpl: "project/Dockerfile.tmpl", out: "Dockerfile"},
	{tmpl: "project/dockerignore.tmpl", out: ".dockerignore"},
	{tmpl: "project/gitignore.tmpl", out: ".gitignore"},
	{tmpl: "project/golangci.yml.tmpl", out: ".golangci.yml"},
	{tmpl: "project/github/test.yml.tmpl", out: ".github/workflows/test.yml"},
	{tmpl: "project/grafana/converge-dashboard.json", out: "grafana/converge-dashboard.json", raw: true},
	{tmpl: "project/hack/control-plane.sh", out: "hack/control-plane.sh", executable: true, raw: true},
	{tmpl: "project/hack/run/main.go.tmpl", out: "hack/run/main.go"},
	{tmpl: "project/hack/chart-files.sh", out: chartFilesScript, executable: true, raw: true},
	{tmpl: "project/hack/boilerplate.go.txt.tmpl", out: boilerplatePath},
	{tmpl: "project/controller/controllers.go.tmpl", out: "internal/controller/controllers.go"},
	{tmpl: "project/controller/suite_test.go.tmpl", out: "internal/controller/suite_test.go"},
	{tmpl: "project/controller/manager_test.go.tmpl", out: "internal/controller/manager_test.go"},
	{tmpl: "project/e2e/e2e_suite_test.go.tmpl", out: "test/e2e/e2e_suite_test.go"},
	{tmpl: "project/e2e/e2e_test.go.tmpl", out: "test/e2e/e2e_test.go"},
	{tmpl: "project/config/default/kustomization.yaml.tmpl", out: "config/default/kustomization.yaml"},
	{tmpl: "project/config/default/metrics_service.yaml.tmpl", out: "config/default/metrics_service.yaml"},
	{tmpl: "project/config/manager/manager.yaml.tmpl", out: "config/manager/manager.yaml"},
	{tmpl: "project/config/manager/kustomization.yaml.tmpl", out: "config/manager/kustomization.yaml"},
	{tmpl: "project/config/rbac/kustomization.yaml.tmpl", out: "config/rbac/kustomization.yaml"},
	{tmpl: "project/config/rbac/service_account.yaml.tmpl", out: "config/rbac/service_account.yaml"},
	{tmpl: "project/config/rbac/role_binding.yaml.tmpl", out: "config/rbac/role_binding.yaml"},
	{tmpl: "project/config/rbac/leader_election_role.yaml.tmpl", out: "config/rbac/leader_election_role.yaml"},
	{tmpl: "project/config/rbac/leader_election_role_binding.yaml.tmpl", out: "config/rbac/leader_election_role_binding.yaml"},
	{tmpl: "project/config/rbac/metrics_auth_role.yaml.tmpl", out: "config/rbac/metrics_auth_role.yaml"},
	{tmpl: "project/config/rbac/metrics_auth_role_binding.yaml.tmpl", out: "config/rbac/metrics_auth_role_binding.yaml"},
	{tmpl: "project/config/rbac/metrics_reader_role.yaml.tmpl", out: "config/rbac/metrics_reader_role.yaml"},
	{tmpl: "project/config/rbac/debug_reader_role.yaml.tmpl", out: "config/rbac/debug_reader_role.yaml"},
	{tmpl: "project/config/crd/kustomization.yaml.tmpl", out: "config/crd/kustomization.yaml"},
	{tmpl: "project/config/samples/kustomization.yaml.tmpl", out: "config/samples/kustomization.yaml"},
	{tmpl: "project/config/prometheus/kustomization.yaml.tmpl", out: "config/prometheus/kustomization.yaml"},
	{tmpl: "project/config/prometheus/monitor.yaml.tmpl", out: "config/prometheus/monitor.yaml"},
	{tmpl: "project/config/network-policy/kustomization.yaml.tmpl", out: "config/network-policy/kustomization.yaml"},
	{tmpl: "project/config/network-policy/allow-metrics-traffic.yaml.tmpl", out: "config/network-policy/allow-metrics-traffic.yaml"},
}

// chartFiles are the Helm chart, rendered once per project; make manifests
// (hack/chart-files.sh) copies what controller-gen generates into its
// files/ folder.
var chartFiles = []fileSpec{
	{tmpl: "chart/Chart.yaml.tmpl", out: "dist/chart/Chart.yaml"},
	{tmpl: "chart/values.yaml.tmpl", out: "dist/chart/values.yaml"},
	{tmpl: "chart/helmignore.tmpl", out: "dist/chart/.helmignore"},
	{tmpl: "chart/templates/_helpers.tpl.tmpl", out: "dist/chart/templates/_helpers.tpl"},
	{tmpl: "chart/templates/NOTES.txt.tmpl", out: "dist/chart/templates/NOTES.txt"},
	{tmpl: "chart/templates/manager.yaml.tmpl", out: "dist/chart/templates/manager.yaml"},
	{tmpl: "chart/templates/rbac.yaml.tmpl", out: "dist/chart/templates/rbac.yaml"},
	{tmpl: "chart/templates/rbac-helpers.yaml.tmpl", out: "dist/chart/templates/rbac-helpers.yaml"},
	{tmpl: "chart/templates/crds.yaml.tmpl", out: "dist/chart/templates/crds.yaml"},
	{tmpl: "chart/templates/metrics-service.yaml.tmpl", out: "dist/chart/templates/metrics-service.yaml"},
	{tmpl: "chart/templates/monitoring.yaml.tmpl", out: "dist/chart/templates/monitoring.yaml"},
}

// chartWebhookFiles are rendered into the chart once the project has a
// webhook.
var chartWebhookFiles = []fileSpec{
	{tmpl: "chart/templates/webhooks.yaml.tmpl", out: "dist/chart/templates/webhooks.yaml"},
}

// chartFilesScript copies into the chart what controller-gen generates.
const chartFilesScript = "hack/chart-files.sh"

// builtinFiles are rendered per controller of a built-in kind.
var builtinFiles = []fileSpec{
	{tmpl: "builtin/controller.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller.go"},
	{tmpl: "builtin/controller_test.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller_test.go"},
	{tmpl: "builtin/controller_unit_test.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller_unit_test.go"},
}

// apiFiles are rendered per new API kind and version.
var apiFiles = []fileSpec{
	{tmpl: "api/types.go.tmpl", out: "{{.R.APIDir}}/{{.R.Lower}}_types.go"},
	{tmpl: "api/sample.yaml.tmpl", out: "config/samples/{{.R.SampleFile}}"},
}

// apiControllerFiles are rendered per new API kind, at its first version.
var apiControllerFiles = []fileSpec{
	{tmpl: "api/controller.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller.go"},
	{tmpl: "api/controller_test.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller_test.go"},
	{tmpl: "api/controller_unit_test.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller_unit_test.go"},
	{tmpl: "api/controller_explore_test.go.tmpl", out: "internal/controller/{{.R.IdentLower}}_controller_explore_test.go"},
	{tmpl: "api/rbac/admin_role.yaml.tmpl", out: "config/rbac/{{.R.IdentLower}}_admin_role.yaml"},
	{tmpl: "api/rbac/editor_role.yaml.tmpl", out: "config/rbac/{{.R.IdentLower}}_editor_role.yaml"},
	{tmpl: "api/rbac/viewer_role.yaml.tmpl", out: "config/rbac/{{.R.IdentLower}}_viewer_role.yaml"},
}

// webhookProjectFiles are rendered once the project has a webhook: what
// make deploy needs to serve them.
var webhookProjectFiles = []fileSpec{
	{tmpl: "webhook/config/webhook/kustomization.yaml.tmpl", out: "config/webhook/kustomization.yaml"},
	{tmpl: "webhook/config/webhook/kustomizeconfig.yaml.tmpl", out: "config/webhook/kustomizeconfig.yaml"},
	{tmpl: "webhook/config/webhook/service.yaml.tmpl", out: "config/webhook/service.yaml"},
	{tmpl: "webhook/config/certmanager/certificate.yaml.tmpl", out: "config/certmanager/certificate.yaml"},
	{tmpl: "webhook/config/certmanager/kustomization.yaml.tmpl", out: "config/certmanager/kustomization.yaml"},
	{tmpl: "webhook/config/certmanager/kustomizeconfig.yaml.tmpl", out: "config/certmanager/kustomizeconfig.yaml"},
	{tmpl: "webhook/config/default/manager_webhook_patch.yaml.tmpl", out: "config/default/manager_webhook_patch.yaml"},
	{tmpl: "project/config/network-policy/allow-webhook-traffic.yaml.tmpl", out: "config/network-policy/allow-webhook-traffic.yaml"},
}

// webhookFiles are rendered per webhook (a kind at a version).
var webhookFiles = []fileSpec{
	{tmpl: "webhook/webhook.go.tmpl", out: "{{.W.Package}}/{{.W.IdentLower}}_webhook.go"},
	{tmpl: "webhook/webhook_test.go.tmpl", out: "internal/controller/{{.W.IdentLower}}_{{.R.Version}}_webhook_test.go"},
}

// builtinWebhookFiles are rendered per webhook of a built-in kind.
var builtinWebhookFiles = []fileSpec{
	{tmpl: "webhook/builtin_webhook.go.tmpl", out: "{{.W.Package}}/{{.W.IdentLower}}_webhook.go"},
	{tmpl: "webhook/builtin_webhook_test.go.tmpl", out: "internal/controller/{{.W.IdentLower}}_{{.R.Version}}_webhook_test.go"},
}

// hubFiles are rendered per conversion webhook, in the hub's API package.
var hubFiles = []fileSpec{
	{tmpl: "webhook/hub.go.tmpl", out: "{{.R.APIDir}}/{{.R.Lower}}_conversion.go"},
	{tmpl: "webhook/config/default/crd_conversion_patch.yaml.tmpl", out: "config/default/{{.R.Plural}}_conversion_patch.yaml"},
}

// spokeFiles are rendered per spoke version of a conversion webhook.
var spokeFiles = []fileSpec{
	{tmpl: "webhook/spoke.go.tmpl", out: "{{.R.APIDir}}/{{.R.Lower}}_conversion.go"},
}

// groupVersionFiles are rendered per new API group version.
var groupVersionFiles = []fileSpec{
	{tmpl: "api/doc.go.tmpl", out: "{{.R.APIDir}}/doc.go"},
	{tmpl: "api/register.go.tmpl", out: "{{.R.APIDir}}/register.go"},
}

// render returns every file converge generates for p, in a stable order.
// Go files are gofmt-ed; a template that yields invalid Go is an error.
func render(p Project) ([]File, error) {
	r := renderer{p: p, base: templateData{Project: p, APIs: p.apis()}}
	if err := r.add(projectFiles, r.base); err != nil {
		return nil, err
	}
	if err := r.add(chartFiles, r.base); err != nil {
		return nil, err
	}
	for _, gv := range r.base.APIs {
		d := r.base
		d.R = gv
		for _, res := range p.Resources {
			if !res.Builtin && res.ImportPath == gv.ImportPath {
				d.Kinds = append(d.Kinds, res)
			}
		}
		if err := r.add(groupVersionFiles, d); err != nil {
			return nil, err
		}
	}
	for _, res := range p.Resources {
		d := r.base
		d.R = res
		specs := apiFiles
		switch {
		case res.Builtin:
			specs = builtinFiles
			d.Sample = sampleFor(res)
		case p.IsFirstVersion(res):
			specs = append(slices.Clip(apiFiles), apiControllerFiles...)
		}
		if err := r.add(specs, d); err != nil {
			return nil, err
		}
	}
	if len(p.Webhooks) > 0 {
		if err := r.add(webhookProjectFiles, r.base); err != nil {
			return nil, err
		}
		if err := r.add(chartWebhookFiles, r.base); err != nil {
			return nil, err
		}
	}
	for _, w := range p.Webhooks {
		if err := r.webhook(w); err != nil {
			return nil, err
		}
	}
	return r.files, nil
}

// renderer gathers the files render makes for p.
type renderer struct {
	p     Project
	base  templateData
	files []File
}

// add renders each of specs with d.
func (r *renderer) add(specs []fileSpec, d templateData) error {
	for _, s := range specs {
		f, err := renderOne(s, d)
		if err != nil {
			return err
		}
		r.files = append(r.files, f)
	}
	return nil
}

// webhook renders the files of webhook w: of a built-in kind, or of an
// API kind with its conversion hub and spokes when w converts.
func (r *renderer) webhook(w Webhook) error {
	d := r.base
	d.W = w
	if w.Builtin {
		res, err := lookupBuiltin(w.Group, w.Version, w.Kind)
		if err != nil {
			return err
		}
		d.R, d.Sample = res, sampleFor(res)
		return r.add(builtinWebhookFiles, d)
	}
	d.R, _ = r.p.resourceAt(w.Group, w.Kind, w.Version)
	for _, v := range w.Spokes {
		spoke, _ := r.p.resourceAt(w.Group, w.Kind, v)
		d.Spokes = append(d.Spokes, spoke)
	}
	if err := r.add(webhookFiles, d); err != nil {
		return err
	}
	if !w.Conversion {
		return nil
	}
	if err := r.add(hubFiles, d); err != nil {
		return err
	}
	for _, spoke := range d.Spokes {
		sd := r.base
		sd.W, sd.R, sd.Hub = w, spoke, d.R
		if err := r.add(spokeFiles, sd); err != nil {
			return err
		}
	}
	return nil
}

func renderOne(s fileSpec, d templateData) (File, error) {
	out, err := execute(template.Must(template.New("path").Funcs(funcs).Parse(s.out)), d)
	if err != nil {
		return File{}, fmt.Errorf("render the path of %s: %w", s.tmpl, err)
	}
	if s.raw {
		b, err := templateFS.ReadFile("templates/" + s.tmpl)
		return File{Path: out, Content: b, Executable: s.executable, CreateOnly: s.createOnly}, err
	}
	var buf bytes.Buffer
	t, ok := templates()[s.tmpl]
	if !ok {
		return File{}, fmt.Errorf("no template %s", s.tmpl)
	}
	if err := t.Execute(&buf, d); err != nil {
		return File{}, fmt.Errorf("render %s: %w", out, err)
	}
	content := buf.Bytes()
	if out == boilerplatePath {
		content = []byte(licenseHeader(d.Project))
	}
	if strings.HasSuffix(out, ".go") {
		content = append([]byte(licenseHeader(d.Project)+"\n"), content...)
		formatted, err := format.Source(content)
		if err != nil {
			return File{}, fmt.Errorf("render %s: the template yields invalid Go: %w\n%s", out, err, content)
		}
		content = formatted
	}
	return File{Path: string(out), Content: content, Executable: s.executable, CreateOnly: s.createOnly}, nil
}

func execute(t *template.Template, d templateData) (string, error) {
	var b strings.Builder
	err := t.Execute(&b, d)
	return b.String(), err
}

// lowerCamel turns a kind into a Go variable name: CronJob → cronJob,
// HTTPRoute → httpRoute, PV → pv.
func lowerCamel(kind string) string {
	r := []rune(kind)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // HTTPRoute: the R starts the next word
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// taken are names the generated functions already use.
var taken = map[string]bool{
	"ctx": true, "log": true, "r": true, "err": true, "mgr": true, "ns": true,
	"context": true, "reconcile": true, "framework": true, "logr": true, "declarative": true,
	"informers": true, "metav1": true, "corev1": true, "state": true, "configMap": true, "got": true,
	"types": true, "meta": true, "controller": true, "admin": true, "kube": true,
	"webhook": true, "field": true, "apierrors": true, "fmt": true, "hub": true, "strings": true,
}

// varName is the kind's variable name in generated code, kept clear of
// keywords and of the names around it.
func varName(r Resource) string {
	v := lowerCamel(r.Kind)
	if token.IsKeyword(v) || taken[v] || v == r.Alias() {
		v += "Obj"
	}
	return v
}
