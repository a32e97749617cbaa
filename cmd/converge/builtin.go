package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Built-in kinds are the ones client-go's scheme knows: the kinds of
// k8s.io/api at the version the framework uses. Their Go package comes from
// the registered type, so nothing is listed by hand.

var builtinIndex = sync.OnceValue(func() map[schema.GroupVersion]map[string]reflect.Type {
	idx := map[schema.GroupVersion]map[string]reflect.Type{}
	for gvk, t := range clientgoscheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || gvk.Version == "__internal" || !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
			continue // lists, internal versions, and the options types every group version registers
		}
		gv := gvk.GroupVersion()
		if idx[gv] == nil {
			idx[gv] = map[string]reflect.Type{}
		}
		idx[gv][gvk.Kind] = t
	}
	return idx
})

// builtinGroups returns the set of built-in API group names ("" for core).
func builtinGroups() map[string]bool {
	groups := map[string]bool{}
	for gv := range builtinIndex() {
		groups[gv.Group] = true
	}
	return groups
}

// sortedBuiltinGroups lists the built-in groups for messages, core first.
func sortedBuiltinGroups() []string {
	var out []string
	for g := range builtinGroups() {
		if g != "" {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return append([]string{"core"}, out...)
}

// lookupBuiltin resolves a built-in kind, with errors that list what exists.
// group "core" or "" is the core group.
func lookupBuiltin(group, version, kind string) (Resource, error) {
	if group == "core" {
		group = ""
	}
	idx := builtinIndex()
	if !builtinGroups()[group] {
		return Resource{}, fmt.Errorf("group %q is not a built-in Kubernetes API group; built-in groups are: %s (for a new API of your own use converge create api)", group, strings.Join(sortedBuiltinGroups(), ", "))
	}
	gv := schema.GroupVersion{Group: group, Version: version}
	kinds, ok := idx[gv]
	if !ok {
		var versions []string
		for other := range idx {
			if other.Group == group {
				versions = append(versions, other.Version)
			}
		}
		slices.Sort(versions)
		return Resource{}, fmt.Errorf("built-in group %s has no version %s; its versions are: %s", displayGroup(group), version, strings.Join(versions, ", "))
	}
	t, ok := kinds[kind]
	if !ok {
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		slices.Sort(names)
		return Resource{}, fmt.Errorf("%s/%s has no kind %q; its kinds are: %s", displayGroup(group), version, kind, strings.Join(names, ", "))
	}
	plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
	return Resource{
		Group:      group,
		Version:    version,
		Kind:       kind,
		Plural:     plural.Resource,
		Builtin:    true,
		ImportPath: t.PkgPath(),
	}, nil
}

func displayGroup(group string) string {
	if group == "" {
		return "core"
	}
	return group
}
