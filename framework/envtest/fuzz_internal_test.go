package envtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadCRDFile reads arbitrary YAML as a CRD file: it never panics, every
// error names the file, and whatever it accepts is a named
// apiextensions.k8s.io/v1 CustomResourceDefinition.
func FuzzLoadCRDFile(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "crds", "widgets.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("---\n# comment only\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	f.Add([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "crds.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		crds, err := loadFile(path, "CRDs", checkCRD)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, c := range crds {
			if c.GetKind() != "CustomResourceDefinition" || c.GetAPIVersion() != "apiextensions.k8s.io/v1" || c.GetName() == "" {
				t.Errorf("accepted %s %s %q", c.GetAPIVersion(), c.GetKind(), c.GetName())
			}
		}
	})
}
