package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The name rules. Each validator returns nil or one error that says what was
// given, what is wrong and what is allowed, with an example; the CLI prints
// it as is.

// maxKindLen leaves room for the plural ("es" at most) in a 63-character DNS label.
const maxKindLen = 61

// reservedKinds would clash with identifiers converge generates next to the
// type (in api/<group>/<version> and internal/controller).
var reservedKinds = []string{"GroupVersion", "AddToScheme"}

// ValidateKind checks a kind: UpperCamelCase ASCII letters and digits,
// starting with an upper-case letter, at most 61 characters (its lower-case
// form and its plural name the CRD's resource, DNS-1035 labels of at most
// 63), and not ending in "List" (the list type takes that name).
func ValidateKind(kind string) error {
	const allowed = "a kind is UpperCamelCase: an upper-case letter (A-Z), then letters and digits only, at most 61 characters, e.g. Order or CronJob"
	switch {
	case kind == "":
		return fmt.Errorf("--kind is required: %s", allowed)
	case len(kind) > maxKindLen:
		return fmt.Errorf("kind %q is %d characters long: %s", kind, len(kind), allowed)
	case kind[0] < 'A' || kind[0] > 'Z':
		return fmt.Errorf("kind %q does not start with an upper-case letter: %s", kind, allowed)
	}
	for _, r := range kind {
		if !isASCIILetter(r) && (r < '0' || r > '9') {
			return fmt.Errorf("kind %q holds %q: %s", kind, r, allowed)
		}
	}
	if strings.HasSuffix(kind, "List") {
		return fmt.Errorf("kind %q ends in List, which is reserved for the list type (%sList would be the list of %s): pick another name", kind, kind, kind)
	}
	if slices.Contains(reservedKinds, kind) {
		return fmt.Errorf("kind %q clashes with a name converge generates in the API package (%s): pick another name", kind, strings.Join(reservedKinds, ", "))
	}
	return nil
}

func isASCIILetter(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }

var versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// ValidateVersion checks an API version: v1, v2, v1alpha1, v2beta3.
func ValidateVersion(version string) error {
	const allowed = `a version is "v", a number from 1, and optionally "alpha" or "beta" and a number from 1: v1, v2, v1alpha1, v2beta3`
	if version == "" {
		return fmt.Errorf("--version is required: %s", allowed)
	}
	if !versionRE.MatchString(version) {
		return fmt.Errorf("version %q is invalid: %s", version, allowed)
	}
	return nil
}

// reservedGroupSuffixes are API groups that belong to Kubernetes itself:
// CRDs in them need an API review approval annotation.
var reservedGroupSuffixes = []string{"k8s.io", "kubernetes.io"}

// ValidateAPIGroup checks the --group of a new API (create api) and returns
// the full group: group itself when it holds a dot, else group.domain. The
// group must be a DNS subdomain (lower-case letters, digits, '-' and '.'),
// must not be a built-in group (apps, batch, ...) and must not end in k8s.io
// or kubernetes.io.
func ValidateAPIGroup(group, domain string) (string, error) {
	const allowed = "a group is a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. shop or shop.example.com"
	if group == "" {
		return "", fmt.Errorf("--group is required: %s", allowed)
	}
	if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
		return "", fmt.Errorf("group %q is invalid: %s", group, allowed)
	}
	if group == "core" || builtinGroups()[group] {
		return "", fmt.Errorf("group %q is a built-in Kubernetes API group: a new API needs a group of its own, e.g. shop (which becomes shop.%s); for a controller of built-in %s kinds use converge create controller", group, domainOr(domain), group)
	}
	if first := firstLabel(group); first[0] < 'a' || first[0] > 'z' {
		return "", fmt.Errorf("group %q starts with %q: its first label names the Go package folder api/%s and must start with a lower-case letter, e.g. shop", group, first[0], first)
	}
	full := group
	if !strings.Contains(group, ".") {
		if domain == "" {
			return "", fmt.Errorf("group %q has no dot and the project has no domain: pass a full group such as %s.example.com", group, group)
		}
		full = group + "." + domain
	}
	if errs := validation.IsDNS1123Subdomain(full); len(errs) > 0 {
		return "", fmt.Errorf("group %q is invalid: %s", full, strings.Join(errs, "; "))
	}
	for _, s := range reservedGroupSuffixes {
		if full == s || strings.HasSuffix(full, "."+s) {
			return "", fmt.Errorf("group %q ends in %s, which is reserved for Kubernetes' own APIs: use a domain you own, e.g. %s.example.com", full, s, firstLabel(group))
		}
	}
	return full, nil
}

func domainOr(domain string) string {
	if domain == "" {
		return "example.com"
	}
	return domain
}

// ValidateDomain checks a project's domain, the suffix of its API groups:
// a DNS subdomain with at least one dot, e.g. example.com.
func ValidateDomain(domain string) error {
	const allowed = "a domain is a DNS subdomain with at least one dot, in lower case, e.g. example.com or team.example.com"
	if domain == "" {
		return fmt.Errorf("--domain is required: %s", allowed)
	}
	if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 || !strings.Contains(domain, ".") {
		return fmt.Errorf("domain %q is invalid: %s", domain, allowed)
	}
	for _, s := range reservedGroupSuffixes {
		if domain == s || strings.HasSuffix(domain, "."+s) {
			return fmt.Errorf("domain %q ends in %s, which is reserved for Kubernetes' own APIs: use a domain you own, e.g. example.com", domain, s)
		}
	}
	return nil
}

// ValidateModulePath checks a Go module path with golang.org/x/mod's rules
// (what go mod init and the module proxy accept), and with the go command's
// rule for the packages it builds: the last element of a package's import
// path must start with a letter, a digit, '.' or '_' (an element starting
// with '-' would read as a flag to the compiler). The project's main
// package is the module's root, so the rule holds for the module path's
// last element too, which module.CheckPath lets start with '-' or '~'.
func ValidateModulePath(path string) error {
	const allowed = "a module path is like example.com/team/operator: slash-separated elements of letters, digits and -._~, the first a domain name with a dot"
	if path == "" {
		return fmt.Errorf("--module is required: %s", allowed)
	}
	if err := module.CheckPath(path); err != nil {
		return fmt.Errorf("module path %q is invalid: %s; %s", path, strings.TrimPrefix(err.Error(), "malformed module path "+fmt.Sprintf("%q", path)+": "), allowed)
	}
	if last := path[strings.LastIndex(path, "/")+1:]; !safeArg(last) {
		fixed := strings.TrimLeft(last, "-~")
		if fixed == "" {
			fixed = "op"
		}
		return fmt.Errorf("module path %q is invalid: its last element %q starts with %q, and the go command builds no package whose import path ends in such an element (main.go's package is the module's root): start it with a letter or digit, e.g. %s; %s", path, last, last[0], path[:len(path)-len(last)]+fixed, allowed)
	}
	return nil
}

// safeArg is the go command's test of a package import path's last
// element (cmd/go/internal/load.SafeArg): it starts with an ASCII letter
// or digit, '.', '_', '/' or a non-ASCII character.
func safeArg(elem string) bool {
	if elem == "" {
		return false
	}
	c := elem[0]
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '.' || c == '_' || c == '/' || c >= utf8.RuneSelf
}

// ValidateProjectName checks the project's name, which prefixes the names
// of its cluster objects (a Deployment "<name>-controller-manager", a
// namespace "<name>-system"): a DNS-1123 label of at most 40 characters.
func ValidateProjectName(name string) error {
	const allowed = "a project name is lower-case letters, digits and '-', starting with a letter, ending with a letter or digit, at most 40 characters (it prefixes the names of the project's objects), e.g. order-operator"
	if len(name) > 40 || len(validation.IsDNS1035Label(name)) > 0 {
		return fmt.Errorf("project name %q is invalid: %s", name, allowed)
	}
	return nil
}

// ValidatePlural checks a resource's plural name: a lower-case DNS-1035
// label, e.g. orders.
func ValidatePlural(plural string) error {
	if len(validation.IsDNS1035Label(plural)) > 0 {
		return fmt.Errorf("plural %q is invalid: a plural is lower-case letters, digits and '-', starting with a letter, at most 63 characters, e.g. orders", plural)
	}
	return nil
}

// projectNameFrom derives a project name from a module path: its last
// element without a major-version suffix, lower-cased, with characters a
// DNS label cannot hold turned into '-'. It returns "" when nothing usable
// is left.
func projectNameFrom(modulePath string) string {
	prefix, _, _ := module.SplitPathVersion(modulePath)
	last := prefix[strings.LastIndex(prefix, "/")+1:]
	var b strings.Builder
	for _, r := range strings.ToLower(last) {
		switch {
		case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		case b.Len() > 0:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	for strings.Contains(name, "--") {
		name = strings.ReplaceAll(name, "--", "-")
	}
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	if name != "" && (name[0] < 'a' || name[0] > 'z') {
		name = "op-" + name
		if len(name) > 40 {
			name = strings.TrimRight(name[:40], "-")
		}
	}
	if ValidateProjectName(name) != nil {
		return ""
	}
	return name
}

// codeHosts are module path hosts whose name is not the project's own
// domain; for them the domain is the owner's pages domain instead.
var codeHosts = map[string]string{"github.com": "github.io", "gitlab.com": "gitlab.io", "codeberg.org": "codeberg.page"}

// domainFrom derives the API group domain from a module path: its first
// element (example.com for example.com/team/op), or the owner's pages
// domain for code hosts (acme.github.io for github.com/acme/op).
func domainFrom(modulePath string) string {
	elems := strings.Split(modulePath, "/")
	host := strings.ToLower(elems[0])
	if pages, ok := codeHosts[host]; ok && len(elems) > 1 {
		if d := strings.ToLower(elems[1]) + "." + pages; ValidateDomain(d) == nil {
			return d
		}
	}
	if ValidateDomain(host) == nil {
		return host
	}
	return "example.com"
}

func firstLabel(group string) string {
	label, _, _ := strings.Cut(group, ".")
	return label
}
