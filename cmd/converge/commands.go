package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// commonFlags are the flags of every scaffolding command.
type commonFlags struct {
	dir          string
	force        bool
	skipGenerate bool
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "dir", ".", "the project's folder, `DIR`")
	fs.BoolVar(&c.force, "force", false, "overwrite files you changed since converge generated them (they are kept otherwise)")
	fs.BoolVar(&c.skipGenerate, "skip-generate", false, "only write files: skip go mod tidy and controller-gen (run make manifests later)")
}

var initCommand = command{
	path:    "init",
	summary: "create a project: go.mod, main.go, Makefile, tests, config/, Dockerfile",
	usage: `Usage: converge init --module PATH [--dir DIR] [flags]

Creates a controller project in DIR (created if missing): a go.mod requiring
converge, a main.go using framework.Flags (kubeconfig, leader election, metrics
and probe addresses), a Makefile (run, test, build, manifests, deploy), a README,
a Ginkgo suite that starts a real control plane, config/ (least-privilege RBAC,
a Deployment with restricted pod security, kustomizations) and a Dockerfile.
Then it runs go mod tidy and controller-gen.

Example:
  converge init --module example.com/team/op --dir op
`,
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		var c commonFlags
		c.register(fs)
		module := fs.String("module", "", "the Go module `PATH`, e.g. example.com/team/op (required)")
		domain := fs.String("domain", "", "the `DOMAIN` ending the project's API groups: --group shop becomes shop.DOMAIN\n(default: the module path's host, or OWNER.github.io for github.com/OWNER/...)")
		name := fs.String("name", "", "the project's `NAME`, which prefixes its cluster objects (default: the module path's last element)")
		replace := fs.String("converge-replace", os.Getenv("CONVERGE_REPLACE"), "a local converge checkout (its `PATH`) that go.mod replaces the module with (default $CONVERGE_REPLACE)")
		version := fs.String("converge-version", "", "the converge `VERSION` go.mod requires (default: this binary's version, else the latest)")
		return func(ctx context.Context, u *ui) error {
			return runInit(ctx, u, c, initOptions{module: *module, domain: *domain, name: *name, replace: *replace, version: *version})
		}
	},
}

type initOptions struct {
	module, domain, name, replace, version string
}

// validate checks the flags given to init, as usage errors.
func (o initOptions) validate() error {
	if err := ValidateModulePath(o.module); err != nil {
		return usageError{err.Error()}
	}
	if o.domain != "" {
		if err := ValidateDomain(o.domain); err != nil {
			return usageError{err.Error()}
		}
	}
	if o.name != "" {
		if err := ValidateProjectName(o.name); err != nil {
			return usageError{err.Error()}
		}
	}
	return nil
}

// project is the project init writes in dir: p, the one stored there when
// exists (the flags given must agree with it), else one made from the flags.
func (o initOptions) project(dir string, p Project, exists bool) (Project, error) {
	if exists {
		// Re-running init: the project keeps what it was created with.
		for _, f := range []struct{ flag, given, stored string }{
			{"--module", o.module, p.Module}, {"--domain", o.domain, p.Domain}, {"--name", o.name, p.Name},
		} {
			if f.given != "" && f.given != f.stored {
				return p, fmt.Errorf("%s already holds a converge project with %s %s (not %s); converge cannot rename a project", dir, f.flag, f.stored, f.given)
			}
		}
		return p, nil
	}
	p = Project{Module: o.module, Domain: o.domain, Name: o.name}
	if p.Domain == "" {
		p.Domain = domainFrom(o.module)
	}
	if p.Name == "" {
		if p.Name = projectNameFrom(o.module); p.Name == "" {
			return p, usagef("cannot derive a project name from module path %q: pass --name", o.module)
		}
	}
	return p, nil
}

func runInit(ctx context.Context, u *ui, c commonFlags, o initOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	m, exists, err := loadManifest(dir)
	if err != nil {
		return err
	}
	p, err := o.project(dir, m.Project, exists)
	if err != nil {
		return err
	}
	// converge writes go.mod only when it is missing: one that is there
	// must be for this module, or nothing generated would build.
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
		if mp := modfile.ModulePath(b); mp != p.Module {
			return fmt.Errorf("%s declares module %q, not %s: run converge init in another folder, or pass --module %s", filepath.Join(dir, "go.mod"), mp, p.Module, mp)
		}
	}
	// How go.mod requires converge: from the flags on a first run, and on a
	// re-run when they are given (go.mod is then rewritten), so a failed
	// init is repaired by running it again with the right flag.
	depGiven := !exists || o.replace != "" || o.version != ""
	if depGiven {
		dep, err := convergeDep(o.replace, o.version)
		if err != nil {
			return err
		}
		if !c.skipGenerate {
			// Before anything is written: a version the go command cannot
			// download would leave a project that does not build.
			if dep, err = resolveConverge(ctx, dep); err != nil {
				return err
			}
		}
		if exists && dep != p.Converge {
			u.printf("converge init: converge was %s, now %s\n", p.Converge, dep)
		}
		p.Converge = dep
	}
	u.printf("converge init: project %s in %s\n", p.Module, dir)
	if !exists {
		u.printf("  name %s (--name), API groups end in %s (--domain), converge %s\n", p.Name, p.Domain, p.Converge)
	}
	// go.mod is written once, from the template; after that (or when the
	// folder had one) the requirement is edited in place.
	modChanged := false
	if depGiven {
		if modChanged, err = setConvergeDep(dir, p.Converge); err != nil {
			return err
		}
		if modChanged {
			u.printf("  %-10s go.mod (converge %s)\n", ActionUpdate, p.Converge)
		}
	}
	kept, err := scaffold(ctx, u, dir, &m, p, c, modChanged)
	if err != nil {
		return err
	}
	printNextSteps(u, dir)
	u.printf("  converge create api --group shop --version v1alpha1 --kind Order         # a new API and its declarative controller\n")
	u.printf("  converge create controller --group apps --version v1 --kind Deployment   # a controller of a built-in kind\n")
	u.printf("  make test                                                                # vet, then the specs on a real control plane\n")
	printKept(u, kept, "init")
	return nil
}

var createAPICommand = command{
	path:    "create api",
	summary: "add a new API kind: Go types, CRD, a declarative controller and its test",
	usage: `Usage: converge create api --group GROUP --version VERSION --kind KIND [flags]

Adds a new API kind to the project in DIR: its Go types with conditions
(api/GROUP/VERSION/KIND_types.go), the deepcopy code and the CRD (generated by
controller-gen), a declarative controller (internal/controller/KIND_controller.go)
with its RBAC markers, its Ginkgo spec, its unit test on framework/fake, a
sample, and its registration in internal/controller/controllers.go.

A GROUP without a dot gets the project's domain: --group shop becomes
shop.<domain>. Built-in groups (apps, batch, ...) and groups ending in k8s.io
or kubernetes.io are refused: use converge create controller for built-in kinds.

A KIND another group of the project has already (a Frigate in groups ship
and sea, or an API kind named as a built-in one) gets its own API package,
CRD and sample; its controller, files, roles and Go identifiers start with
its group's name (SeaFrigate: internal/controller/seafrigate_controller.go,
SetupSeaFrigateController), so both live in internal/controller.

--namespaced=false makes the kind cluster-scoped, as with kubebuilder: its
CRD has scope Cluster, its sample and specs name no namespace, and the
example controller writes its ConfigMap in namespace default.

For a KIND the project has, another VERSION adds that version of the API:
its types and sample only. The controller stays on the first version, which
is also the one the CRD stores; converge create webhook --conversion converts
between them.

Examples:
  converge create api --group shop --version v1alpha1 --kind Order
  converge create api --group shop --version v1 --kind Order   # a second version
  converge create api --group tenancy --version v1alpha1 --kind Tenant --namespaced=false   # cluster-scoped
`,
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		var c commonFlags
		c.register(fs)
		group := fs.String("group", "", "the API `GROUP`: shop (becomes shop.<domain>) or a full group such as shop.example.com (required)")
		version := fs.String("version", "", "the API `VERSION`: v1, v1alpha1, v2beta3 (required)")
		kind := fs.String("kind", "", "the `KIND`, UpperCamelCase: Order (required)")
		plural := fs.String("plural", "", "the resource name, `PLURAL` (default: the lower-case kind made plural, e.g. orders)")
		namespaced := fs.Bool("namespaced", true, "whether the kind's objects live in a namespace; --namespaced=false makes a cluster-scoped kind (CRD scope Cluster)")
		return func(ctx context.Context, u *ui) error {
			return runCreate(ctx, u, c, func(p Project) (Resource, error) {
				r, err := newAPIResource(p, *group, *version, *kind, *plural)
				r.ClusterScoped = !*namespaced
				if err == nil && *plural == "" {
					if one, ok := singularOf(r.Kind); ok {
						u.printf("  %-10s kind %s looks plural: a kind names one object (%s), and its resource is the plural, here %s (kubectl get %s).\n"+
							"             If %s is one object, go on (--plural sets the resource); if not, delete what this command wrote and create --kind %s.\n",
							"warning", r.Kind, one, r.Plural, r.Plural, r.Kind, one)
					}
				}
				return r, err
			})
		}
	},
}

var createControllerCommand = command{
	path:    "create controller",
	summary: "add a controller of a built-in kind (Deployment, ConfigMap, ...) and its test",
	usage: `Usage: converge create controller --group GROUP --version VERSION --kind KIND [flags]

Adds a controller of a built-in Kubernetes kind to the project in DIR: a
reconciler stub with its RBAC markers (internal/controller/KIND_controller.go),
its Ginkgo spec, its unit test on framework/fake (KIND_controller_unit_test.go),
and its registration in internal/controller/controllers.go. GROUP is the
kind's API group; "core" (or "") is the core group of Pods, ConfigMaps and
Services.

Examples:
  converge create controller --group apps --version v1 --kind Deployment
  converge create controller --group core --version v1 --kind ConfigMap
`,
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		var c commonFlags
		c.register(fs)
		group := fs.String("group", "", "the kind's API `GROUP`: apps, batch, core (required; \"core\" or \"\" for the core group)")
		version := fs.String("version", "", "the API `VERSION`, e.g. v1 (required)")
		kind := fs.String("kind", "", "the built-in `KIND`, e.g. Deployment (required)")
		return func(ctx context.Context, u *ui) error {
			groupSet := false
			fs.Visit(func(f *flag.Flag) { groupSet = groupSet || f.Name == "group" })
			return runCreate(ctx, u, c, func(Project) (Resource, error) {
				if !groupSet {
					return Resource{}, usagef(`--group is required: the kind's API group, e.g. apps, batch, or core (or "") for the core group`)
				}
				if err := ValidateKind(*kind); err != nil {
					return Resource{}, usageError{err.Error()}
				}
				if err := ValidateVersion(*version); err != nil {
					return Resource{}, usageError{err.Error()}
				}
				r, err := lookupBuiltin(*group, *version, *kind)
				if err != nil {
					return Resource{}, usageError{err.Error()}
				}
				return r, nil
			})
		}
	},
}

var versionCommand = command{
	path:    "version",
	summary: "print converge's version",
	usage:   "Usage: converge version\n\nPrints the version of this converge binary, which new projects require.\n",
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		return func(_ context.Context, u *ui) error {
			v := buildVersion()
			if v == "" {
				v = "(devel: built without version information)"
			}
			u.printf("converge %s\n", v)
			return nil
		}
	},
}

// newAPIResource validates the flags of create api.
func newAPIResource(p Project, group, version, kind, plural string) (Resource, error) {
	if err := ValidateKind(kind); err != nil {
		return Resource{}, usageError{err.Error()}
	}
	full, err := ValidateAPIGroup(group, p.Domain)
	if err != nil {
		return Resource{}, usageError{err.Error()}
	}
	if err := ValidateVersion(version); err != nil {
		return Resource{}, usageError{err.Error()}
	}
	if plural == "" {
		plural = guessPlural(kind)
	}
	if err := ValidatePlural(plural); err != nil {
		return Resource{}, usageError{err.Error()}
	}
	r := Resource{Group: full, Version: version, Kind: kind, Plural: plural}
	r.ImportPath = p.Module + "/" + r.APIDir()
	return r, nil
}

// runCreate adds the resource that newResource builds to the project in
// c.dir and scaffolds it.
func runCreate(ctx context.Context, u *ui, c commonFlags, newResource func(Project) (Resource, error)) error {
	dir, m, err := loadProject(c.dir)
	if err != nil {
		return err
	}
	p := m.Project
	r, err := newResource(p)
	if err != nil {
		return err
	}
	added, err := p.addResource(r)
	if err != nil {
		return err
	}
	for _, stored := range p.Resources {
		if stored.Group == r.Group && stored.Kind == r.Kind {
			r.Controller = stored.Controller // what addResource named its controller
		}
	}
	what := "controller for built-in kind"
	if !r.Builtin {
		what = "API"
	}
	state := ""
	if !added {
		state = " (already in the project: regenerating)"
	}
	u.printf("converge create: %s %s/%s %s in %s%s\n", what, r.GroupOrCore(), r.Version, r.Kind, dir, state)
	kept, err := scaffold(ctx, u, dir, &m, p, c, false)
	if err != nil {
		return err
	}
	printNextSteps(u, dir)
	if r.Builtin {
		u.printf("  edit internal/controller/%s_controller.go: Reconcile, and an RBAC marker for each write\n", r.IdentLower())
		u.printf("  make test   # regenerates config/rbac/role.yaml, then runs the specs with exactly those permissions\n")
	} else if first := p.Resources[p.findResource(r.Group, r.Kind)]; first.Version != r.Version {
		u.printf("  edit %s/%s_types.go: version %s of %s (its controller stays on %s, the CRD's storage version)\n", r.APIDir(), r.Lower(), r.Version, r.Kind, first.Version)
		var spokes []string
		for _, v := range p.Versions(r.Group, r.Kind) {
			if v != r.Version {
				spokes = append(spokes, v)
			}
		}
		u.printf("  converge create webhook --group %s --version %s --kind %s --conversion --spoke %s   # convert between the versions, through the newest (the hub)\n", r.Group, r.Version, r.Kind, strings.Join(spokes, ","))
		u.printf("  make test   # regenerates deepcopy and the CRD (now with both versions), then runs the specs\n")
	} else {
		u.printf("  edit %s/%s_types.go (the spec and status) and internal/controller/%s_controller.go (Desired)\n", r.APIDir(), r.Lower(), r.IdentLower())
		u.printf("  make test   # regenerates deepcopy, CRD and RBAC, then runs the specs on a real control plane\n")
		u.printf("  make run   # the controllers on an embedded control plane (or your kubeconfig's cluster), the CRDs installed; Ctrl-C stops it\n")
		u.printf("  kubectl --kubeconfig bin/kubeconfig apply -k config/samples   # in a second terminal while make run runs (on your cluster: without --kubeconfig)\n")
		sample := r.SampleName()
		if !r.ClusterScoped {
			sample = "default/" + sample
		}
		u.printf("  converge explain %s %s   # while make run runs: where the sample stands (make run prints the debug page's URL)\n", r.Kind, sample)
	}
	printKept(u, kept, "create")
	return nil
}

// loadProject reads the manifest of the project in dir, which must exist,
// and returns dir as an absolute path.
func loadProject(dir string) (string, manifest, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", manifest{}, err
	}
	m, exists, err := loadManifest(dir)
	if err != nil {
		return "", m, err
	}
	if !exists {
		return "", m, fmt.Errorf("%s is not a converge project (it has no %s): run converge init first, or pass --dir", dir, manifestPath)
	}
	return dir, m, nil
}

// printNextSteps starts the closing advice of a command run on dir.
func printNextSteps(u *ui, dir string) {
	u.printf("\nNext steps:\n")
	if rel := relDir(dir); rel != "." {
		u.printf("  cd %s\n", rel)
	}
}

// scaffold renders p, writes the files under dir, records them in m and,
// unless skipped, runs go mod tidy and controller-gen: when a file changed,
// a tool's output is missing, or regenerate. It returns the files kept
// because the user changed them.
func scaffold(ctx context.Context, u *ui, dir string, m *manifest, p Project, c commonFlags, regenerate bool) (kept []string, err error) {
	files, err := render(p)
	if err != nil {
		return nil, err
	}
	outcomes, writeErr := writeFiles(dir, files, m, c.force)
	// Record what was written even when a write failed, so a re-run knows
	// those files are converge's.
	m.Project = p
	b, err := m.encode()
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, filepath.FromSlash(manifestPath)), b, false); err != nil {
		return nil, err
	}
	if writeErr != nil {
		return nil, writeErr
	}
	counts := map[Action]int{}
	for _, o := range outcomes {
		counts[o.Action]++
		switch o.Action {
		case ActionUnchanged:
		case ActionKeep:
			kept = append(kept, o.Path)
			if o.Foreign {
				u.printf("  %-10s %s: it was there before, not written by converge (--force overwrites it)\n", o.Action, o.Path)
			} else {
				u.printf("  %-10s %s: changed since converge generated it (--force overwrites it)\n", o.Action, o.Path)
			}
		default:
			u.printf("  %-10s %s\n", o.Action, o.Path)
		}
	}
	changed := counts[ActionCreate] + counts[ActionUpdate] + counts[ActionOverwrite]
	u.printf("  %d created, %d updated, %d overwritten, %d unchanged, %d kept\n",
		counts[ActionCreate], counts[ActionUpdate], counts[ActionOverwrite], counts[ActionUnchanged], counts[ActionKeep])
	if c.skipGenerate {
		u.printf("  skipped go mod tidy and controller-gen (--skip-generate): run go mod tidy and make manifests\n")
		return kept, nil
	}
	missing := missingOutputs(dir, p)
	if changed == 0 && len(missing) == 0 && !regenerate {
		return kept, nil // nothing new: the generated code is as the last run left it
	}
	return kept, generate(ctx, u, dir, p)
}

// missingOutputs lists the files the tools generate that are not there.
func missingOutputs(dir string, p Project) []string {
	want := []string{"go.sum", "config/rbac/role.yaml"}
	if p.hasWebhooks(Webhook.Admission) {
		want = append(want, "config/webhook/manifests.yaml")
	}
	for _, r := range p.Resources {
		if !r.Builtin {
			want = append(want, r.APIDir()+"/zz_generated.deepcopy.go", "config/crd/bases/"+r.CRDFile())
		}
	}
	var missing []string
	for _, f := range want {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, f)
		}
	}
	return missing
}

func printKept(u *ui, kept []string, cmd string) {
	if len(kept) == 0 {
		return
	}
	u.printf("\nKept %d file(s) you changed: %s.\n", len(kept), strings.Join(kept, ", "))
	u.printf("To see what converge would write instead, commit your work, rerun converge %s with --force and look at git diff.\n", cmd)
}

// relDir is dir relative to the working directory, for messages.
func relDir(dir string) string {
	wd, err := os.Getwd()
	if err != nil {
		return dir
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return dir
	}
	return rel
}
