package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the templates")

// goldenProject is the project the golden files show: every template, with
// a built-in kind that has a namespaced sample (Deployment), one with a
// cluster-scoped sample (Namespace), one without a sample (StorageClass),
// two kinds of one new API group version (Order, Customer), a second
// version of Order (v1), and webhooks: Order v1 with defaulting, validation
// and conversion (hub v1, spoke v1alpha1), Customer v1alpha1 with
// validation, Order v1alpha1 with defaulting; a cluster-scoped kind
// (Tenant), the same kind in another group (sales's Order, whose controller
// is SalesOrder), and webhooks of a built-in kind (core Pod).
func goldenProject(t *testing.T) Project {
	t.Helper()
	p := Project{
		Module:   "example.com/team/op",
		Name:     "op",
		Domain:   "example.com",
		Converge: ConvergeDep{Replace: "/path/to/converge"},
	}
	for _, b := range [][3]string{{"apps", "v1", "Deployment"}, {"core", "v1", "Namespace"}, {"storage.k8s.io", "v1", "StorageClass"}} {
		r, err := lookupBuiltin(b[0], b[1], b[2])
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, &p, r)
	}
	for _, kv := range [][2]string{{"Order", "v1alpha1"}, {"Customer", "v1alpha1"}, {"Order", "v1"}} {
		r, err := newAPIResource(p, "shop", kv[1], kv[0], "")
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, &p, r)
	}
	tenant, err := newAPIResource(p, "tenancy", "v1alpha1", "Tenant", "")
	if err != nil {
		t.Fatal(err)
	}
	tenant.ClusterScoped = true
	mustAdd(t, &p, tenant)
	salesOrder, err := newAPIResource(p, "sales", "v1alpha1", "Order", "")
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, &p, salesOrder)
	for _, w := range []Webhook{
		{Group: "", Version: "v1", Kind: "Pod", Defaulting: true, Validation: true, Builtin: true},
		{Group: "shop.example.com", Version: "v1", Kind: "Order", Defaulting: true, Validation: true, Conversion: true, Spokes: []string{"v1alpha1"}},
		{Group: "shop.example.com", Version: "v1alpha1", Kind: "Customer", Validation: true},
		{Group: "shop.example.com", Version: "v1alpha1", Kind: "Order", Defaulting: true},
	} {
		if err := p.addWebhook(w); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func mustAdd(t *testing.T, p *Project, r Resource) {
	t.Helper()
	if _, err := p.addResource(r); err != nil {
		t.Fatal(err)
	}
}

// TestGolden compares every rendered file with testdata/golden/<path>.golden.
// After changing a template, run go test ./cmd/converge -run TestGolden -update
// and review the diff of testdata/golden.
func TestGolden(t *testing.T) {
	files, err := render(goldenProject(t))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("testdata", "golden")
	if *update {
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, f := range files {
		if f.Path == "hack/control-plane.sh" {
			continue // a copy of the repository's script: TestControlPlaneScriptInSync
		}
		golden := filepath.Join(root, filepath.FromSlash(f.Path)+".golden")
		want[golden] = true
		if *update {
			if err := writeFile(golden, f.Content, false); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s: %v (run with -update to create it)", f.Path, err)
			continue
		}
		if !bytes.Equal(b, f.Content) {
			t.Errorf("%s differs from %s (run with -update and review the diff):\n%s", f.Path, golden, firstDiff(string(b), string(f.Content)))
		}
	}
	// A golden file no template renders any more is stale.
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !want[p] {
			t.Errorf("%s is not rendered any more: run with -update", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  golden:   %s\n  rendered: %s", i+1, wl, gl)
		}
	}
	return ""
}

// The generated projects pin the dependency versions the framework itself
// uses: a mismatch would test users' projects against other versions.
func TestVersionsMatchFrameworkGoMod(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Go.Version != goVersion {
		t.Errorf("goVersion = %s, the framework's go.mod says go %s", goVersion, mf.Go.Version)
	}
	want := map[string]string{
		"k8s.io/apimachinery":       k8sVersion,
		"k8s.io/client-go":          k8sVersion,
		"k8s.io/api":                k8sVersion,
		"github.com/onsi/ginkgo/v2": ginkgoVersion,
		"github.com/onsi/gomega":    gomegaVersion,
	}
	for _, r := range mf.Require {
		if v, ok := want[r.Mod.Path]; ok {
			if v != r.Mod.Version {
				t.Errorf("generated projects require %s %s, the framework's go.mod %s", r.Mod.Path, v, r.Mod.Version)
			}
			delete(want, r.Mod.Path)
		}
	}
	for p := range want {
		t.Errorf("the framework's go.mod does not require %s", p)
	}
}

// Generated projects build the control plane with the same script as the
// framework, so both use (and share) the same cached binaries.
func TestControlPlaneScriptInSync(t *testing.T) {
	repo, err := os.ReadFile(filepath.Join("..", "..", "hack", "control-plane.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := templateFS.ReadFile("templates/project/hack/control-plane.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(repo, ours) {
		t.Fatal("templates/project/hack/control-plane.sh differs from hack/control-plane.sh: copy it over (cp hack/control-plane.sh cmd/converge/templates/project/hack/)")
	}
}
