package main

import (
	"strings"
	"testing"
)

// Each bad name is rejected with a message that names it, says what is
// wrong and what is allowed. The expected texts are whole messages: they are
// the CLI's user interface.
func TestValidateKind(t *testing.T) {
	const allowed = "a kind is UpperCamelCase: an upper-case letter (A-Z), then letters and digits only, at most 61 characters, e.g. Order or CronJob"
	for _, tc := range []struct {
		kind, want string
	}{
		{"Order", ""},
		{"CronJob", ""},
		{"HTTPRoute", ""},
		{"V2Thing", ""},
		{"", "--kind is required: " + allowed},
		{"order", `kind "order" does not start with an upper-case letter: ` + allowed},
		{"1Order", `kind "1Order" does not start with an upper-case letter: ` + allowed},
		{"Order-Item", `kind "Order-Item" holds '-': ` + allowed},
		{"Order_Item", `kind "Order_Item" holds '_': ` + allowed},
		{"Ordér", `kind "Ordér" holds 'é': ` + allowed},
		{"Order Item", `kind "Order Item" holds ' ': ` + allowed},
		{"O" + strings.Repeat("x", 61), `kind "O` + strings.Repeat("x", 61) + `" is 62 characters long: ` + allowed},
		{"OrderList", `kind "OrderList" ends in List, which is reserved for the list type (OrderListList would be the list of OrderList): pick another name`},
		{"GroupVersion", `kind "GroupVersion" clashes with a name converge generates in the API package (GroupVersion, AddToScheme): pick another name`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			checkErr(t, ValidateKind(tc.kind), tc.want)
		})
	}
}

func TestValidateVersion(t *testing.T) {
	const allowed = `a version is "v", a number from 1, and optionally "alpha" or "beta" and a number from 1: v1, v2, v1alpha1, v2beta3`
	for _, tc := range []struct {
		version, want string
	}{
		{"v1", ""},
		{"v2", ""},
		{"v1alpha1", ""},
		{"v2beta3", ""},
		{"v10beta12", ""},
		{"", "--version is required: " + allowed},
		{"1", `version "1" is invalid: ` + allowed},
		{"V1", `version "V1" is invalid: ` + allowed},
		{"v0", `version "v0" is invalid: ` + allowed},
		{"v1alpha", `version "v1alpha" is invalid: ` + allowed},
		{"v1alpha0", `version "v1alpha0" is invalid: ` + allowed},
		{"v1gamma1", `version "v1gamma1" is invalid: ` + allowed},
		{"v1.0", `version "v1.0" is invalid: ` + allowed},
		{"v01", `version "v01" is invalid: ` + allowed},
	} {
		t.Run(tc.version, func(t *testing.T) {
			checkErr(t, ValidateVersion(tc.version), tc.want)
		})
	}
}

func TestValidateAPIGroup(t *testing.T) {
	const allowed = "a group is a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. shop or shop.example.com"
	for _, tc := range []struct {
		group, domain, full, want string
	}{
		{"shop", "example.com", "shop.example.com", ""},
		{"shop-v2", "example.com", "shop-v2.example.com", ""},
		{"shop.acme.io", "example.com", "shop.acme.io", ""},
		{"", "example.com", "", "--group is required: " + allowed},
		{"Shop", "example.com", "", `group "Shop" is invalid: ` + allowed},
		{"shop_v2", "example.com", "", `group "shop_v2" is invalid: ` + allowed},
		{"-shop", "example.com", "", `group "-shop" is invalid: ` + allowed},
		{"shop.", "example.com", "", `group "shop." is invalid: ` + allowed},
		{"apps", "example.com", "", `group "apps" is a built-in Kubernetes API group: a new API needs a group of its own, e.g. shop (which becomes shop.example.com); for a controller of built-in apps kinds use converge create controller`},
		{"batch", "example.com", "", `group "batch" is a built-in Kubernetes API group: a new API needs a group of its own, e.g. shop (which becomes shop.example.com); for a controller of built-in batch kinds use converge create controller`},
		{"core", "example.com", "", `group "core" is a built-in Kubernetes API group: a new API needs a group of its own, e.g. shop (which becomes shop.example.com); for a controller of built-in core kinds use converge create controller`},
		{"networking.k8s.io", "example.com", "", `group "networking.k8s.io" is a built-in Kubernetes API group: a new API needs a group of its own, e.g. shop (which becomes shop.example.com); for a controller of built-in networking.k8s.io kinds use converge create controller`},
		{"shop.k8s.io", "example.com", "", `group "shop.k8s.io" ends in k8s.io, which is reserved for Kubernetes' own APIs: use a domain you own, e.g. shop.example.com`},
		{"shop.x.kubernetes.io", "example.com", "", `group "shop.x.kubernetes.io" ends in kubernetes.io, which is reserved for Kubernetes' own APIs: use a domain you own, e.g. shop.example.com`},
		{"shop", "", "", `group "shop" has no dot and the project has no domain: pass a full group such as shop.example.com`},
		{strings.Repeat("a", 250), "example.com", "", `group "` + strings.Repeat("a", 250) + `.example.com" is invalid: must be no more than 253 characters`},
	} {
		t.Run(tc.group, func(t *testing.T) {
			full, err := ValidateAPIGroup(tc.group, tc.domain)
			checkErr(t, err, tc.want)
			if full != tc.full {
				t.Errorf("full group = %q, want %q", full, tc.full)
			}
		})
	}
}

func TestValidateModulePath(t *testing.T) {
	const allowed = "a module path is like example.com/team/operator: slash-separated elements of letters, digits and -._~, the first a domain name with a dot"
	for _, tc := range []struct {
		path, want string
	}{
		{"example.com/team/op", ""},
		{"github.com/acme/order-operator/v2", ""},
		{"", "--module is required: " + allowed},
		{"op", `module path "op" is invalid: missing dot in first path element; ` + allowed},
		{"example.com/team op", `module path "example.com/team op" is invalid: invalid char ' '; ` + allowed},
		{"Example.com/op", `module path "Example.com/op" is invalid: invalid char 'E' in first path element; ` + allowed},
		{"example.com//op", `module path "example.com//op" is invalid: double slash; ` + allowed},
		{"-example.com/op", `module path "-example.com/op" is invalid: leading dash; ` + allowed},
		// module.CheckPath takes these; the go command builds no package of them.
		{"github.com/foo/-bar", `module path "github.com/foo/-bar" is invalid: its last element "-bar" starts with '-', and the go command builds no package whose import path ends in such an element (main.go's package is the module's root): start it with a letter or digit, e.g. github.com/foo/bar; ` + allowed},
		{"example.com/~op", `module path "example.com/~op" is invalid: its last element "~op" starts with '~', and the go command builds no package whose import path ends in such an element (main.go's package is the module's root): start it with a letter or digit, e.g. example.com/op; ` + allowed},
		{"example.com/team/-", `module path "example.com/team/-" is invalid: its last element "-" starts with '-', and the go command builds no package whose import path ends in such an element (main.go's package is the module's root): start it with a letter or digit, e.g. example.com/team/op; ` + allowed},
		// The root package of a major version is .../v2: the go command builds it.
		{"github.com/foo/-bar/v2", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			checkErr(t, ValidateModulePath(tc.path), tc.want)
		})
	}
}

func TestValidateDomainAndName(t *testing.T) {
	const domainAllowed = "a domain is a DNS subdomain with at least one dot, in lower case, e.g. example.com or team.example.com"
	const nameAllowed = "a project name is lower-case letters, digits and '-', starting with a letter, ending with a letter or digit, at most 40 characters (it prefixes the names of the project's objects), e.g. order-operator"
	for _, tc := range []struct {
		what, value, want string
	}{
		{"domain", "example.com", ""},
		{"domain", "example", `domain "example" is invalid: ` + domainAllowed},
		{"domain", "Example.com", `domain "Example.com" is invalid: ` + domainAllowed},
		{"domain", "x.k8s.io", `domain "x.k8s.io" ends in k8s.io, which is reserved for Kubernetes' own APIs: use a domain you own, e.g. example.com`},
		{"name", "order-operator", ""},
		{"name", "Order", `project name "Order" is invalid: ` + nameAllowed},
		{"name", "1op", `project name "1op" is invalid: ` + nameAllowed},
		{"name", strings.Repeat("a", 41), `project name "` + strings.Repeat("a", 41) + `" is invalid: ` + nameAllowed},
		{"plural", "orders", ""},
		{"plural", "Orders", `plural "Orders" is invalid: a plural is lower-case letters, digits and '-', starting with a letter, at most 63 characters, e.g. orders`},
	} {
		t.Run(tc.what+"/"+tc.value, func(t *testing.T) {
			var err error
			switch tc.what {
			case "domain":
				err = ValidateDomain(tc.value)
			case "name":
				err = ValidateProjectName(tc.value)
			case "plural":
				err = ValidatePlural(tc.value)
			}
			checkErr(t, err, tc.want)
		})
	}
}

func TestLookupBuiltin(t *testing.T) {
	for _, tc := range []struct {
		group, version, kind string
		want                 string // error, or "importPath plural" on success
	}{
		{"apps", "v1", "Deployment", "k8s.io/api/apps/v1 deployments"},
		{"core", "v1", "ConfigMap", "k8s.io/api/core/v1 configmaps"},
		{"", "v1", "Endpoints", "k8s.io/api/core/v1 endpoints"},
		{"networking.k8s.io", "v1", "Ingress", "k8s.io/api/networking/v1 ingresses"},
		{"rbac.authorization.k8s.io", "v1", "ClusterRole", "k8s.io/api/rbac/v1 clusterroles"},
		{"apps", "v1", "Deploymnt", `apps/v1 has no kind "Deploymnt"; its kinds are: ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet`},
		{"apps", "v7", "Deployment", "built-in group apps has no version v7; its versions are: v1, v1beta1, v1beta2"},
		{"shop", "v1", "Order", `group "shop" is not a built-in Kubernetes API group; built-in groups are: core, admissionregistration.k8s.io, `},
	} {
		t.Run(tc.group+"/"+tc.version+"/"+tc.kind, func(t *testing.T) {
			r, err := lookupBuiltin(tc.group, tc.version, tc.kind)
			if err != nil {
				if !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("error:\n  %v\nwant it to start with\n  %s", err, tc.want)
				}
				return
			}
			if got := r.ImportPath + " " + r.Plural; got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDerivedNames(t *testing.T) {
	for _, tc := range []struct{ module, name, domain string }{
		{"example.com/team/op", "op", "example.com"},
		{"github.com/Acme/Order_Operator/v2", "order-operator", "acme.github.io"},
		{"gitlab.com/acme/shop", "shop", "acme.gitlab.io"},
		{"example.com/team/2fa", "op-2fa", "example.com"},
		{"corp.example.com/ops/shop.operator", "shop-operator", "corp.example.com"},
	} {
		t.Run(tc.module, func(t *testing.T) {
			if got := projectNameFrom(tc.module); got != tc.name {
				t.Errorf("projectNameFrom = %q, want %q", got, tc.name)
			}
			if got := domainFrom(tc.module); got != tc.domain {
				t.Errorf("domainFrom = %q, want %q", got, tc.domain)
			}
		})
	}
}

func TestNamesInCode(t *testing.T) {
	for _, tc := range []struct{ kind, plural, lower, varName string }{
		{"Order", "orders", "order", "order"},
		{"CronJob", "cronjobs", "cronJob", "cronJob"},
		{"HTTPRoute", "httproutes", "httpRoute", "httpRoute"},
		{"PV", "pvs", "pv", "pv"},
		{"Policy", "policies", "policy", "policy"},
		{"Key", "keys", "key", "key"},
		{"Status", "statuses", "status", "status"},
		{"Box", "boxes", "box", "box"},
		{"Type", "types", "type", "typeObj"},
		{"Log", "logs", "log", "logObj"},
		{"ConfigMap", "configmaps", "configMap", "configMapObj"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			if got := guessPlural(tc.kind); got != tc.plural {
				t.Errorf("guessPlural = %q, want %q", got, tc.plural)
			}
			if got := lowerCamel(tc.kind); got != tc.lower {
				t.Errorf("lowerCamel = %q, want %q", got, tc.lower)
			}
			if got := varName(Resource{Kind: tc.kind, Group: "shop.example.com", Version: "v1"}); got != tc.varName {
				t.Errorf("varName = %q, want %q", got, tc.varName)
			}
		})
	}
}

// checkErr compares err with want: "" means no error; a want ending in
// "..." is a prefix.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == "":
	case err == nil:
		t.Fatalf("no error, want %q", want)
	case strings.HasSuffix(want, "..."):
		if !strings.HasPrefix(err.Error(), strings.TrimSuffix(want, "...")) {
			t.Fatalf("error:\n  %v\nwant it to start with\n  %s", err, strings.TrimSuffix(want, "..."))
		}
	case err.Error() != want:
		t.Fatalf("error:\n  %v\nwant\n  %s", err, want)
	}
}

func TestSingularOf(t *testing.T) {
	for _, tc := range []struct{ kind, singular string }{
		{"Orders", "Order"},
		{"Policies", "Policy"},
		{"Boxes", "Box"},
		{"Classes", "Class"},
		{"CronJobs", "CronJob"},
		{"Order", ""},
		{"Status", ""},
		{"Address", ""},
		{"Analysis", ""},
		{"Ingress", ""},
		{"S", ""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			got, ok := singularOf(tc.kind)
			if got != tc.singular || ok != (tc.singular != "") {
				t.Errorf("singularOf = %q, %v; want %q", got, ok, tc.singular)
			}
		})
	}
}
