package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// manifestPath is where a project records what converge generated, relative
// to the project root. Commit it: it is how converge tells a file nobody
// touched since it generated it from one the user changed.
const manifestPath = ".converge/scaffold.json"

// manifestVersion is the format of the manifest; a newer one is refused.
// Format 2 added webhooks and several versions of a kind, which a converge
// that knows only format 1 would drop when it rewrites the manifest; it
// reads format 1 as it is. Format 3 added cluster-scoped kinds, webhooks
// of built-in kinds and the controller names of a kind in two groups
// (Resource.ClusterScoped, Webhook.Builtin, Resource.Controller), which a
// converge that knows format 2 would drop, and so render a kind namespaced
// or a webhook for an API the project does not have.
const manifestVersion = 3

// Project is what converge knows about a project: enough to render every
// file it generates. It is stored in the manifest.
type Project struct {
	// Module is the Go module path, e.g. example.com/team/op.
	Module string `json:"module"`
	// Name prefixes the project's cluster objects and names its binary.
	Name string `json:"name"`
	// Domain is appended to short API groups: shop becomes shop.<Domain>.
	Domain string `json:"domain"`
	// Converge is how go.mod requires the framework.
	Converge ConvergeDep `json:"converge"`
	// Resources are the controllers and APIs, in the order they were created.
	// A kind of the project's own API may appear at several versions: the
	// first one created has the controller and is the CRD's storage version.
	Resources []Resource `json:"resources,omitempty"`
	// Webhooks are the admission and conversion webhooks, in the order they
	// were created.
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// ConvergeDep is the framework requirement written into go.mod.
type ConvergeDep struct {
	// Version is the required version; "" means the latest, resolved by go get.
	Version string `json:"version,omitempty"`
	// Replace is a local checkout that go.mod replaces the module with.
	Replace string `json:"replace,omitempty"`
}

// Resource is one controller: of a built-in kind (create controller) or of
// a new API of the project (create api).
type Resource struct {
	// Group is the full API group: "" for core, apps, shop.example.com.
	Group string `json:"group"`
	// Version is the API version, e.g. v1alpha1.
	Version string `json:"version"`
	// Kind is the UpperCamelCase kind.
	Kind string `json:"kind"`
	// Plural is the resource name, e.g. orders.
	Plural string `json:"plural"`
	// Builtin is true for kinds of k8s.io/api.
	Builtin bool `json:"builtin,omitempty"`
	// ClusterScoped is true for a new API kind whose objects have no
	// namespace (create api --namespaced=false): its CRD has scope Cluster.
	ClusterScoped bool `json:"clusterScoped,omitempty"`
	// ImportPath is the Go package of the kind's type.
	ImportPath string `json:"importPath"`
	// Controller names the kind's controller, its files and its Go
	// identifiers when the kind's name is already another group's in the
	// project: the group's first label and the kind (ship's Frigate, then
	// sea's SeaFrigate). Empty, they are the kind's.
	Controller string `json:"controller,omitempty"`
}

// Ident is the UpperCamelCase name of the kind's controller in Go code
// (SetupIdentController, IdentReconciler): the kind, unless Controller says.
func (r Resource) Ident() string {
	if r.Controller != "" {
		return r.Controller
	}
	return r.Kind
}

// IdentLower is Ident in lower case: the controller's name and the prefix
// of its files.
func (r Resource) IdentLower() string { return strings.ToLower(r.Ident()) }

// SampleName is the name of the kind's sample in config/samples:
// IdentLower, then "-sample" (order-sample; shoporder-sample for a second
// group's Order). Samples are applied to one namespace together, and the
// example controller names its ConfigMap after its object: two kinds'
// samples of one name would declare the same ConfigMap.
func (r Resource) SampleName() string { return r.IdentLower() + "-sample" }

// Alias is the import name of the kind's package: appsv1, corev1, shopv1alpha1.
func (r Resource) Alias() string {
	var group string
	if r.Builtin {
		// k8s.io/api/<group dir>/<version>, e.g. k8s.io/api/rbac/v1.
		group = path.Base(path.Dir(r.ImportPath))
	} else {
		group = firstLabel(r.Group)
	}
	return strings.ReplaceAll(group, "-", "") + r.Version
}

// Lower is the kind in lower case: the controller's name and file prefix.
func (r Resource) Lower() string { return strings.ToLower(r.Kind) }

// GroupOrCore is the group for display ("core" for the core group).
func (r Resource) GroupOrCore() string { return displayGroup(r.Group) }

// APIDir is the folder of a new API's package, relative to the project root.
func (r Resource) APIDir() string { return path.Join("api", firstLabel(r.Group), r.Version) }

// CRDFile is the file controller-gen writes a new API's CRD to.
func (r Resource) CRDFile() string { return r.Group + "_" + r.Plural + ".yaml" }

// CRDName is the name of a new API's CustomResourceDefinition: plural.group.
func (r Resource) CRDName() string { return r.Plural + "." + r.Group }

// SampleFile is the file of a new API's sample object, under config/samples.
func (r Resource) SampleFile() string {
	return strings.ReplaceAll(firstLabel(r.Group), "-", "_") + "_" + r.Version + "_" + r.Lower() + ".yaml"
}

// groupIdent is group's first label as the start of a Go identifier:
// sea → Sea, "" (core) → Core, my-team.example.com → MyTeam.
func groupIdent(group string) string {
	var b strings.Builder
	upper := true
	for _, c := range displayGroup(firstLabel(group)) {
		switch {
		case c == '-' || c == '_':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(c)))
			upper = false
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// scopeName says how a kind was created, for messages.
func scopeName(clusterScoped bool) string {
	if clusterScoped {
		return "cluster-scoped (--namespaced=false)"
	}
	return "namespaced"
}

// manifest is the stored form of .converge/scaffold.json.
type manifest struct {
	Version int     `json:"version"`
	Project Project `json:"project"`
	// Files maps each generated file (slash-separated, relative to the
	// project root) to the SHA-256 of the content converge last wrote.
	Files map[string]string `json:"files"`
}

// loadManifest reads dir's manifest; ok is false when there is none.
func loadManifest(dir string) (m manifest, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(manifestPath)))
	if errors.Is(err, fs.ErrNotExist) {
		return manifest{Files: map[string]string{}}, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, fmt.Errorf("read %s: %w (fix or delete the file; it records what converge generated)", manifestPath, err)
	}
	if m.Version > manifestVersion {
		return m, false, fmt.Errorf("%s has format %d, newer than this converge understands (%d): update converge", manifestPath, m.Version, manifestVersion)
	}
	if m.Files == nil {
		m.Files = map[string]string{}
	}
	return m, true, nil
}

// encode returns the manifest as indented JSON with sorted keys.
func (m manifest) encode() ([]byte, error) {
	m.Version = manifestVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// findResource returns the index of the resource of group with kind's
// name, or -1. When the kind has several versions, it is the first one
// created.
func (p *Project) findResource(group, kind string) int {
	for i, r := range p.Resources {
		if r.Kind == kind && r.Group == group {
			return i
		}
	}
	return -1
}

// IsFirstVersion reports whether r is the first version of its kind in the
// project: the one with the controller, and the CRD's storage version.
func (p Project) IsFirstVersion(r Resource) bool {
	i := p.findResource(r.Group, r.Kind)
	return i >= 0 && p.Resources[i].Version == r.Version
}

// Versions returns the versions of group's kind, in the order they were
// created.
func (p Project) Versions(group, kind string) []string {
	var out []string
	for _, r := range p.Resources {
		if r.Kind == kind && r.Group == group {
			out = append(out, r.Version)
		}
	}
	return out
}

// Controllers returns the resources that have a controller: each kind once,
// at its first version.
func (p Project) Controllers() []Resource {
	var out []Resource
	for _, r := range p.Resources {
		if p.IsFirstVersion(r) {
			out = append(out, r)
		}
	}
	return out
}

// addResource adds r, or checks that the same resource is already there.
// Kinds must be unique in a project: they name the controller, its files
// and its setup function. The one exception is another version of a kind
// of the project's own API (same group, same plural), which gets its types
// but no second controller.
func (p *Project) addResource(r Resource) (added bool, err error) {
	otherGroup, sameGroup := false, false
	for _, old := range p.Resources {
		if old.Kind != r.Kind {
			continue
		}
		if old.Group != r.Group {
			otherGroup = true
			continue
		}
		r.Controller, sameGroup = old.Controller, true
		same := old.Version == r.Version && old.Builtin == r.Builtin
		otherVersion := !old.Builtin && !r.Builtin
		if !same && !otherVersion {
			return false, fmt.Errorf("the project already has a controller for kind %s (%s/%s): a kind has one controller", r.Kind, old.GroupOrCore(), old.Version)
		}
		if old.Plural != r.Plural {
			return false, fmt.Errorf("kind %s was created with plural %s, not %s", r.Kind, old.Plural, r.Plural)
		}
		if old.ClusterScoped != r.ClusterScoped {
			return false, fmt.Errorf("kind %s was created %s: every version of a kind shares its CRD, and so its scope; pass --namespaced=%t", r.Kind, scopeName(old.ClusterScoped), !old.ClusterScoped)
		}
		if old.Version == r.Version {
			return false, nil
		}
	}
	if otherGroup && !sameGroup {
		// The kind's name is another group's: the controller, its files
		// and its identifiers get the group's name too.
		r.Controller = groupIdent(r.Group) + r.Kind
	}
	for _, other := range p.Resources {
		if other.Kind != r.Kind && (other.Ident() == r.Ident() || other.IdentLower() == r.IdentLower()) {
			return false, fmt.Errorf("kind %s of group %s would name its controller %s, as kind %s (%s/%s) does: controllers and their files must be unique in a project", r.Kind, r.GroupOrCore(), r.Ident(), other.Kind, other.GroupOrCore(), other.Version)
		}
	}
	for _, other := range p.Resources {
		if !r.Builtin && !other.Builtin && firstLabel(other.Group) == firstLabel(r.Group) && other.Group != r.Group {
			return false, fmt.Errorf("group %s would share the folder api/%s with group %s: pick a group whose first label differs", r.Group, firstLabel(r.Group), other.Group)
		}
	}
	p.Resources = append(p.Resources, r)
	return true, nil
}

// apis returns the new APIs' group versions, each once, in creation order.
func (p *Project) apis() []Resource {
	var out []Resource
	seen := map[string]bool{}
	for _, r := range p.Resources {
		if r.Builtin || seen[r.ImportPath] {
			continue
		}
		seen[r.ImportPath] = true
		out = append(out, r)
	}
	return out
}
