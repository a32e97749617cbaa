// Package layering checks that converge's packages import one way:
// reconcile → workqueue → informers → framework, and that nothing depends on
// controller-runtime.
package layering

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/converge-dev/converge"

type pkg struct {
	ImportPath string
	Deps       []string
	Standard   bool
}

func deps(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	pkgs := map[string]pkg{}
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func TestImportsGoOneWay(t *testing.T) {
	pkgs := deps(t)
	forbidden := map[string][]string{
		// reconcile is a leaf: the standard library only.
		"reconcile":  {"."},
		"workqueue":  {module + "/informers", module + "/framework"},
		"informers":  {module + "/framework"},
		"framework":  {"sigs.k8s.io/controller-runtime"},
		"test/e2e":   {"sigs.k8s.io/controller-runtime"},
		"examples/*": {"sigs.k8s.io/controller-runtime"},
	}
	for short, bad := range forbidden {
		for path, p := range pkgs {
			rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
			if !(rel == short || strings.HasSuffix(short, "*") && strings.HasPrefix(rel, strings.TrimSuffix(short, "*"))) {
				continue
			}
			for _, d := range p.Deps {
				for _, b := range bad {
					if b == "." {
						// Any non-standard package: its first element has a dot.
						if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
							t.Errorf("%s imports %s: it must depend on the standard library only", rel, d)
						}
						continue
					}
					if d == b || strings.HasPrefix(d, b+"/") {
						t.Errorf("%s imports %s", rel, d)
					}
				}
			}
		}
	}
	if _, ok := pkgs[module+"/reconcile"]; !ok {
		t.Fatal("go list did not report the reconcile package: the check would be vacuous")
	}
}

func TestNoControllerRuntimeInModule(t *testing.T) {
	for path, p := range deps(t) {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "sigs.k8s.io/controller-runtime") {
				t.Errorf("%s depends on %s; only bench/ (its own module) may", path, d)
			}
		}
	}
}
