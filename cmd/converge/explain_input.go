package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/converge-dev/converge/framework/introspect"
)

// misnamed returns the error of an explain whose input names nothing the
// manager reconciles, with status exitBadInput: a kind no controller
// reconciles (saying which kinds there are, and the closest), a controller
// (--controller) that does not reconcile the kind, or a namespace missing
// for a namespaced kind or given for a cluster-scoped one. nil when the
// input is right.
func misnamed(st introspect.ObjectStatus, only string) error {
	if len(st.Controllers) == 0 {
		msg := fmt.Sprintf("no controller of the manager reconciles kind %q", st.Kind)
		var names []string
		for _, k := range st.Kinds {
			names = append(names, k.Kind)
		}
		if guess := closest(strings.ToLower(st.Kind), lower(names)); guess != "" {
			msg += fmt.Sprintf(": did you mean %s?", names[slices.Index(lower(names), guess)])
		} else {
			msg += "."
		}
		for _, w := range st.WatchedBy {
			msg += fmt.Sprintf(" Controller %s watches it for its %s objects (a child of one, say): explain that %s.", w.Controller, w.Kind.Kind, w.Kind.Kind)
		}
		if len(st.Kinds) > 0 {
			var all []string
			for _, k := range st.Kinds {
				all = append(all, k.String())
			}
			msg += " It reconciles " + strings.Join(all, ", ") + "."
		}
		return exitError{code: exitBadInput, msg: msg}
	}
	var names []string
	for _, ks := range st.Controllers {
		names = append(names, ks.Controller)
		if only != "" && ks.Controller != only {
			continue
		}
		switch {
		case ks.Cached:
		case ks.Scope == introspect.ScopeNamespaced && st.Namespace == "":
			return exitError{code: exitBadInput, msg: fmt.Sprintf("%s is namespaced: name the object NAMESPACE/%s", ks.Kind.Kind, st.Name)}
		case ks.Scope == introspect.ScopeCluster && st.Namespace != "":
			return exitError{code: exitBadInput, msg: fmt.Sprintf("%s is cluster-scoped: name the object %s, without a namespace", ks.Kind.Kind, st.Name)}
		}
	}
	if only != "" && !slices.Contains(names, only) {
		return exitError{code: exitBadInput, msg: fmt.Sprintf("no controller named %q reconciles %s: its controllers are %s", only, st.Kind, strings.Join(names, ", "))}
	}
	return nil
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}
