package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// Webhook is what converge create webhook added for one kind at one
// version of the project's own API.
type Webhook struct {
	// Group, Version and Kind name the API resource (the hub, for
	// conversion): it was created with converge create api.
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Defaulting adds a mutating webhook with a Defaulter.
	Defaulting bool `json:"defaulting,omitempty"`
	// Validation adds a validating webhook with a Validator.
	Validation bool `json:"validation,omitempty"`
	// Conversion makes Version the hub every other version of Kind
	// converts through; Spokes are those other versions.
	Conversion bool     `json:"conversion,omitempty"`
	Spokes     []string `json:"spokes,omitempty"`
	// Builtin is set for a kind of k8s.io/api (Group "" is core): its
	// webhooks use the k8s.io/api type, and the project has no API for it.
	Builtin bool `json:"builtin,omitempty"`
	// Controller is the kind's Resource.Controller: the name of its Go
	// identifiers and files when another group's kind has the kind's name.
	Controller string `json:"controller,omitempty"`
}

// Ident starts the webhook's Go identifiers (SetupIdentWebhook,
// IdentDefaulter): the kind, unless Controller says.
func (w Webhook) Ident() string {
	if w.Controller != "" {
		return w.Controller
	}
	return w.Kind
}

// IdentLower is Ident in lower case: the prefix of the webhook's files.
func (w Webhook) IdentLower() string { return strings.ToLower(w.Ident()) }

// Admission reports whether the webhook has a mutating or validating part.
func (w Webhook) Admission() bool { return w.Defaulting || w.Validation }

// Package is the folder of the webhook's Go package, relative to the
// project root: one package per API version, as kubebuilder lays it out.
func (w Webhook) Package() string { return "internal/webhook/" + w.Version }

// Alias is the import name of the webhook's package in main.go and the specs.
func (w Webhook) Alias() string { return "webhook" + w.Version }

// Types lists what the webhook does, for messages: "defaulting, validation".
func (w Webhook) Types() string {
	var out []string
	if w.Defaulting {
		out = append(out, "defaulting")
	}
	if w.Validation {
		out = append(out, "validation")
	}
	if w.Conversion {
		out = append(out, "conversion (hub "+w.Version+", spokes "+strings.Join(w.Spokes, ", ")+")")
	}
	return strings.Join(out, ", ")
}

// webhookPackages returns the webhooks with each Go package once, in
// creation order: main.go imports each of these.
func (p Project) webhookPackages() []Webhook {
	var out []Webhook
	for _, w := range p.Webhooks {
		if !slices.ContainsFunc(out, func(o Webhook) bool { return o.Version == w.Version }) {
			out = append(out, w)
		}
	}
	return out
}

// hasWebhooks reports whether any webhook has the given part.
func (p Project) hasWebhooks(part func(Webhook) bool) bool {
	return slices.ContainsFunc(p.Webhooks, part)
}

// resourceAt returns the project's own API resource of group, kind at version.
func (p Project) resourceAt(group, kind, version string) (Resource, bool) {
	for _, r := range p.Resources {
		if r.Kind == kind && r.Version == version && r.Group == group && !r.Builtin {
			return r, true
		}
	}
	return Resource{}, false
}

// addWebhook adds w to the project, merging it with the webhook already
// there for the same kind and version. Adding a part (defaulting,
// validation, conversion) the kind already has is an error: the files are
// there, and a second registration would fail when the manager starts.
func (p *Project) addWebhook(w Webhook) error {
	for _, other := range p.Webhooks {
		if other.IdentLower() == w.IdentLower() && other.Version == w.Version && other.Group != w.Group {
			return fmt.Errorf("kind %s of group %s at %s already has webhooks in %s/%s_webhook.go: the webhooks of %s %s would go there too", other.Kind, displayGroup(other.Group), w.Version, other.Package(), other.IdentLower(), displayGroup(w.Group), w.Kind)
		}
		if other.Kind == w.Kind && other.Group == w.Group && other.Conversion && w.Conversion {
			return fmt.Errorf("kind %s already has a conversion webhook (hub %s, spokes %s): converge create webhook --conversion runs once per kind; convert a new version by hand in api/.../%s_conversion.go",
				w.Kind, other.Version, strings.Join(other.Spokes, ", "), strings.ToLower(w.Kind))
		}
	}
	for i, other := range p.Webhooks {
		if other.Kind != w.Kind || other.Version != w.Version || other.Group != w.Group {
			continue
		}
		var parts, flags []string
		if other.Defaulting && w.Defaulting {
			parts, flags = append(parts, "a defaulting"), append(flags, "--defaulting")
		}
		if other.Validation && w.Validation {
			parts, flags = append(parts, "a validation"), append(flags, "--validation")
		}
		if len(parts) > 0 {
			return fmt.Errorf("%s %s/%s already has %s webhook (%s/%s_webhook.go): drop %s",
				w.Kind, displayGroup(w.Group), w.Version, strings.Join(parts, " and "), other.Package(), other.IdentLower(), strings.Join(flags, " and "))
		}
		merged := other
		merged.Defaulting = merged.Defaulting || w.Defaulting
		merged.Validation = merged.Validation || w.Validation
		if w.Conversion {
			merged.Conversion, merged.Spokes = true, w.Spokes
		}
		p.Webhooks[i] = merged
		return nil
	}
	p.Webhooks = append(p.Webhooks, w)
	return nil
}

var createWebhookCommand = command{
	path:    "create webhook",
	summary: "add defaulting, validation or conversion webhooks to an API kind (or admission webhooks to a built-in kind), and their test",
	usage: `Usage: converge create webhook --group GROUP --version VERSION --kind KIND [--defaulting] [--validation] [--conversion --spoke VERSIONS] [flags]

Adds webhooks to an API kind the project created with converge create api,
as kubebuilder does:

  --defaulting  a Defaulter (internal/webhook/VERSION/KIND_webhook.go) served
                as a mutating webhook;
  --validation  a Validator in the same file, served as a validating webhook;
  --conversion  conversion between the kind's versions through a hub:
                VERSION is the hub, usually the newest version
                (api/GROUP/VERSION/KIND_conversion.go marks it with a Hub
                method), and each --spoke version gets
                ConvertTo and ConvertFrom (api/GROUP/SPOKE/KIND_conversion.go).
                Create the spoke versions first with converge create api.

For a built-in kind (GROUP core, apps, batch, ...; "core" is the core group
of Pods and ConfigMaps) --defaulting and --validation add webhooks on the
k8s.io/api type, as kubebuilder's create webhook --group core --version v1
--kind Pod does: no API is generated, and the project needs no controller of
the kind. Their example rules are on an annotation, and their markers leave
out the manager's namespace and kube-system (a namespaceSelector).

The file's Setup<KIND>Webhook is called from main.go. It also adds a Ginkgo
spec (internal/controller/KIND_VERSION_webhook_test.go) that runs the webhooks
on the specs' control plane, the +kubebuilder:webhook markers from which
make manifests generates config/webhook/manifests.yaml, and for make deploy
config/webhook, config/certmanager (the serving certificate, issued by
cert-manager, which the cluster must run) and their wiring in config/default.

Example:
  converge create api --group shop --version v1alpha1 --kind Order
  converge create webhook --group shop --version v1alpha1 --kind Order --defaulting --validation
  converge create api --group shop --version v1 --kind Order
  converge create webhook --group shop --version v1 --kind Order --conversion --spoke v1alpha1
  converge create webhook --group core --version v1 --kind Pod --defaulting
`,
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		var c commonFlags
		c.register(fs)
		group := fs.String("group", "", "the API `GROUP` of the kind, as given to converge create api, or a built-in kind's (core, apps, ...) (required)")
		version := fs.String("version", "", "the API `VERSION` the webhooks serve; the hub with --conversion (required)")
		kind := fs.String("kind", "", "the `KIND`, created with converge create api, or a built-in kind such as Pod (required)")
		defaulting := fs.Bool("defaulting", false, "add a defaulting (mutating) webhook")
		validation := fs.Bool("validation", false, "add a validating webhook")
		conversion := fs.Bool("conversion", false, "add conversion between the kind's versions, with VERSION as the hub (needs --spoke)")
		spoke := fs.String("spoke", "", "with --conversion: the other `VERSIONS` of the kind, comma-separated, e.g. v1alpha1,v1beta1")
		return func(ctx context.Context, u *ui) error {
			w := Webhook{Version: *version, Kind: *kind, Defaulting: *defaulting, Validation: *validation, Conversion: *conversion}
			if *spoke != "" {
				w.Spokes = strings.Split(*spoke, ",")
			}
			return runCreateWebhook(ctx, u, c, *group, w)
		}
	},
}

// checkWebhookFlags validates the command line of create webhook, before
// the project is read.
func checkWebhookFlags(group string, w Webhook) error {
	if group == "" {
		return usagef("--group is required: the API group of the kind, as given to converge create api, e.g. shop")
	}
	if err := ValidateVersion(w.Version); err != nil {
		return usageError{err.Error()}
	}
	if err := ValidateKind(w.Kind); err != nil {
		return usageError{err.Error()}
	}
	if !w.Defaulting && !w.Validation && !w.Conversion {
		return usagef("no webhook to add: pass at least one of --defaulting, --validation and --conversion")
	}
	if !w.Conversion && len(w.Spokes) > 0 {
		return usagef("--spoke is only for --conversion: pass --conversion too, or drop --spoke")
	}
	if w.Conversion && len(w.Spokes) == 0 {
		return usagef("--conversion needs --spoke: the versions of %s other than the hub %s, comma-separated, e.g. --spoke v1alpha1", w.Kind, w.Version)
	}
	for i, s := range w.Spokes {
		if err := ValidateVersion(s); err != nil {
			return usagef("--spoke %q: %v", s, err)
		}
		if s == w.Version {
			return usagef("--spoke %s is the hub (--version): the spokes are the other versions of %s", s, w.Kind)
		}
		if slices.Contains(w.Spokes[:i], s) {
			return usagef("--spoke lists %s twice", s)
		}
	}
	return nil
}

// runCreateWebhook adds w to the project in c.dir and scaffolds it.
func runCreateWebhook(ctx context.Context, u *ui, c commonFlags, group string, w Webhook) error {
	if err := checkWebhookFlags(group, w); err != nil {
		return err
	}
	dir, m, err := loadProject(c.dir)
	if err != nil {
		return err
	}
	p := m.Project
	if group == "core" || builtinGroups()[group] {
		return runCreateBuiltinWebhook(ctx, u, c, dir, m, group, w)
	}
	if w.Group, err = ValidateAPIGroup(group, p.Domain); err != nil {
		return usageError{err.Error()}
	}
	if p.findResource(w.Group, w.Kind) < 0 {
		var groups []string
		for _, r := range p.Resources {
			if r.Kind == w.Kind && !r.Builtin && !slices.Contains(groups, r.Group) {
				groups = append(groups, r.Group)
			}
		}
		if len(groups) > 0 {
			return fmt.Errorf("kind %s is in group %s, not %s", w.Kind, strings.Join(groups, " and "), w.Group)
		}
	}
	if r, ok := p.resourceAt(w.Group, w.Kind, w.Version); ok {
		w.Controller = r.Controller
	} else {
		return fmt.Errorf("the project has no API %s/%s %s: create it first with converge create api --group %s --version %s --kind %s%s",
			w.Group, w.Version, w.Kind, group, w.Version, w.Kind, versionsHint(p, w.Group, w.Kind))
	}
	for _, s := range w.Spokes {
		if _, ok := p.resourceAt(w.Group, w.Kind, s); !ok {
			return fmt.Errorf("--spoke %s: the project has no API %s/%s %s: create it first with converge create api --group %s --version %s --kind %s%s",
				s, w.Group, s, w.Kind, group, s, w.Kind, versionsHint(p, w.Group, w.Kind))
		}
	}
	if err := p.addWebhook(w); err != nil {
		return err
	}
	u.printf("converge create: %s webhook for %s/%s %s in %s\n", w.Types(), w.Group, w.Version, w.Kind, dir)
	kept, err := scaffold(ctx, u, dir, &m, p, c, false)
	if err != nil {
		return err
	}
	printNextSteps(u, dir)
	if slices.Contains(kept, "main.go") {
		u.printf("  main.go is yours (kept): call %s.Setup%sWebhook(mgr) in it, importing %s/%s\n", w.Alias(), w.Ident(), p.Module, w.Package())
	}
	if slices.Contains(kept, "internal/controller/suite_test.go") {
		u.printf("  internal/controller/suite_test.go is yours (kept): its BeforeSuite must install and serve the webhook, or the webhook specs fail (see below to get converge's version)\n")
	}
	if w.Admission() {
		u.printf("  edit %s/%s_webhook.go: replace the example rules on spec.message with yours\n", w.Package(), w.IdentLower())
	}
	if w.Conversion {
		u.printf("  edit api/%s/<spoke>/%s_conversion.go when a version's fields change\n", firstLabel(w.Group), strings.ToLower(w.Kind))
	}
	u.printf("  make test   # regenerates config/webhook/manifests.yaml, then runs the webhook specs on a real control plane\n")
	u.printf("  make deploy needs cert-manager in the cluster: it issues the webhook server's certificate (config/certmanager)\n")
	printKept(u, kept, "create")
	return nil
}

// runCreateBuiltinWebhook adds w, for a built-in kind of group, to the
// project m in dir and scaffolds it. As kubebuilder does for core types,
// no API is generated: the webhook uses the k8s.io/api type.
func runCreateBuiltinWebhook(ctx context.Context, u *ui, c commonFlags, dir string, m manifest, group string, w Webhook) error {
	if w.Conversion {
		return usagef("--conversion is for the kinds of the project's own API: the API server converts the built-in kinds itself")
	}
	r, err := lookupBuiltin(group, w.Version, w.Kind)
	if err != nil {
		return usageError{err.Error()}
	}
	p := m.Project
	w.Group, w.Builtin = r.Group, true
	// The webhook's names are those of the kind's controller, if the
	// project has one; else the kind's, unless another group's kind has them.
	if i := p.findResource(r.Group, r.Kind); i >= 0 {
		w.Controller = p.Resources[i].Controller
	} else {
		for _, own := range p.Resources {
			if own.Kind == w.Kind && own.Controller == "" {
				w.Controller = groupIdent(r.Group) + r.Kind
			}
		}
	}
	if err := p.addWebhook(w); err != nil {
		return err
	}
	u.printf("converge create: %s webhook for built-in kind %s/%s %s in %s\n", w.Types(), r.GroupOrCore(), w.Version, w.Kind, dir)
	kept, err := scaffold(ctx, u, dir, &m, p, c, false)
	if err != nil {
		return err
	}
	printNextSteps(u, dir)
	if slices.Contains(kept, "main.go") {
		u.printf("  main.go is yours (kept): call %s.Setup%sWebhook(mgr) in it, importing %s/%s\n", w.Alias(), w.Ident(), p.Module, w.Package())
	}
	u.printf("  edit %s/%s_webhook.go: replace the example rules on the %s annotation with yours\n", w.Package(), w.IdentLower(), p.Domain+"/message")
	u.printf("  the API server sends the webhooks every %s of the cluster: limit them with a namespaceSelector (config/webhook) before make deploy\n", w.Kind)
	u.printf("  make test   # regenerates config/webhook/manifests.yaml, then runs the webhook specs on a real control plane\n")
	u.printf("  make deploy needs cert-manager in the cluster: it issues the webhook server's certificate (config/certmanager)\n")
	printKept(u, kept, "create")
	return nil
}

// versionsHint lists the versions of group's kind, for an error message.
func versionsHint(p Project, group, kind string) string {
	v := p.Versions(group, kind)
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprintf(" (the project has %s at %s)", kind, strings.Join(v, ", "))
}
