package main

import (
	"go/token"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The fuzz targets check that the validators never panic, that every
// rejection says what is allowed, and that every accepted name yields valid
// Kubernetes names and Go identifiers in the generated code. Seeds are in
// testdata/fuzz; run one with go test -fuzz=FuzzValidateKind ./cmd/converge.

func FuzzValidateKind(f *testing.F) {
	for _, s := range []string{"Order", "order", "OrderList", "HTTPRoute", "Type", "Ü", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kind string) {
		err := ValidateKind(kind)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "kind") || !(strings.Contains(msg, "e.g.") || strings.Contains(msg, "pick another name")) {
				t.Fatalf("message does not say what is allowed: %q", msg)
			}
			return
		}
		if errs := validation.IsDNS1035Label(strings.ToLower(kind)); len(errs) > 0 {
			t.Fatalf("accepted %q, but its lower-case form is no DNS-1035 label: %v", kind, errs)
		}
		r := Resource{Kind: kind, Group: "shop.example.com", Version: "v1", Plural: guessPlural(kind)}
		for _, id := range []string{kind, kind + "List", "Setup" + kind + "Controller", varName(r)} {
			if !token.IsIdentifier(id) {
				t.Fatalf("accepted %q, which yields the invalid Go identifier %q", kind, id)
			}
		}
		if ValidatePlural(r.Plural) != nil {
			t.Fatalf("accepted %q, whose guessed plural %q is invalid", kind, r.Plural)
		}
	})
}

func FuzzValidateAPIGroup(f *testing.F) {
	for _, s := range []string{"shop", "shop.acme.io", "apps", "x.k8s.io", "2shop", "shop-v2", "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, group string) {
		full, err := ValidateAPIGroup(group, "example.com")
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "group") {
				t.Fatalf("message does not name the group: %q", msg)
			}
			return
		}
		if errs := validation.IsDNS1123Subdomain(full); len(errs) > 0 || !strings.Contains(full, ".") {
			t.Fatalf("accepted %q as %q, which is no DNS subdomain with a dot: %v", group, full, errs)
		}
		if builtinGroups()[full] || strings.HasSuffix(full, ".k8s.io") || strings.HasSuffix(full, ".kubernetes.io") {
			t.Fatalf("accepted %q as %q, a Kubernetes group", group, full)
		}
		r := Resource{Group: full, Version: "v1alpha1", Kind: "Order", Plural: "orders", ImportPath: "example.com/op/api/" + firstLabel(full) + "/v1alpha1"}
		if !token.IsIdentifier(r.Alias()) {
			t.Fatalf("accepted %q, whose import alias %q is no Go identifier", group, r.Alias())
		}
		if err := module.CheckImportPath(r.ImportPath); err != nil {
			t.Fatalf("accepted %q, whose package path is invalid: %v", group, err)
		}
		if errs := validation.IsDNS1123Subdomain(r.Plural + "." + full); len(errs) > 0 {
			t.Fatalf("accepted %q, whose CRD name would be invalid: %v", group, errs)
		}
	})
}

func FuzzValidateVersion(f *testing.F) {
	for _, s := range []string{"v1", "v1alpha1", "v2beta3", "v0", "1", "v1alpha", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, version string) {
		err := ValidateVersion(version)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "v1alpha1") {
				t.Fatalf("message does not show what is allowed: %q", msg)
			}
			return
		}
		if !token.IsIdentifier(version) || token.IsKeyword(version) {
			t.Fatalf("accepted %q, which cannot name a Go package", version)
		}
		if errs := validation.IsDNS1035Label(version); len(errs) > 0 {
			t.Fatalf("accepted %q, which is no DNS label: %v", version, errs)
		}
	})
}

func FuzzValidateModulePath(f *testing.F) {
	for _, s := range []string{"example.com/team/op", "github.com/Acme/Op/v2", "op", "example.com/a b", "gitlab.com/x/y.z", "", "github.com/foo/-bar", "example.com/~op"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		err := ValidateModulePath(path)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "example.com/team/operator") {
				t.Fatalf("message does not show what is allowed: %q", msg)
			}
			return
		}
		if err := module.CheckPath(path); err != nil {
			t.Fatalf("accepted %q, which the go command refuses: %v", path, err)
		}
		if last := path[strings.LastIndex(path, "/")+1:]; !safeArg(last) {
			t.Fatalf("accepted %q, whose root package the go command refuses to build", path)
		}
		if name := projectNameFrom(path); name != "" && ValidateProjectName(name) != nil {
			t.Fatalf("derived the invalid project name %q from %q", name, path)
		}
		if d := domainFrom(path); ValidateDomain(d) != nil {
			t.Fatalf("derived the invalid domain %q from %q", d, path)
		}
	})
}
