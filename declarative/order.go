package declarative

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// dependencyNames names the children a Child is After (see
// Declarative.dependencyNames).
type dependencyNames struct {
	// id returns the objectID of a dependency.
	id func(object.Object) (string, error)
	// kind returns an object's kind as Options.ChildKinds lists it, without
	// asking the API server; false for a kind not listed.
	kind func(object.Object) (*childKind, bool)
}

// dependencyNames returns how the dependencies of parent's children are
// named (see objectID): their kind must be in Options.ChildKinds, their
// namespace is the parent's when empty for a namespaced kind. Whether a
// kind is namespaced is taken from children, prepared, where they have it
// (asking the REST mapper costs more than the rest of the graph); a kind
// the API server does not serve is taken as namespaced, as prepare takes
// a child of it, and the parent is reconciled again once it is served.
func (d *Declarative[T]) dependencyNames(parent object.Object, children []child) dependencyNames {
	scoped := make(map[*childKind]bool, len(d.children))
	for _, c := range children {
		scoped[c.kind] = c.obj.GetNamespace() != ""
	}
	id := func(obj object.Object) (string, error) {
		if typednil.Is(obj) {
			return "", errors.New("nil object")
		}
		ck, err := d.kindOf(obj)
		if err != nil {
			return "", fmt.Errorf("%T %s: %w", obj, obj.GetName(), err)
		}
		if obj.GetName() == "" {
			return "", fmt.Errorf("%s without a name", ck.gvk.Kind)
		}
		namespaced, known := scoped[ck]
		if !known {
			namespaced, err = d.namespaced(ck)
			if notServed(ck, err) {
				namespaced, err = true, nil
				d.kindWaits.add(ck.gvk.GroupKind(), requestOf(parent))
			}
			if err != nil {
				return "", fmt.Errorf("%s %s: %w", ck.gvk.Kind, obj.GetName(), err)
			}
		}
		ns := obj.GetNamespace()
		switch {
		case !namespaced:
			ns = ""
		case ns == "":
			ns = parent.GetNamespace()
		}
		return objectID(ck.gvk.GroupKind(), ns, obj.GetName()), nil
	}
	kind := func(obj object.Object) (*childKind, bool) {
		if typednil.Is(obj) {
			return nil, false
		}
		ck, err := d.kindOf(obj)
		return ck, err == nil
	}
	return dependencyNames{id: id, kind: kind}
}

// leftOut holds the children IncludeWhen left out, which are not declared:
// they are never resolved, as their kind may not be served, only matched
// with the dependencies that name them.
type leftOut struct {
	parentNamespace string
	// namespaces holds, by "Kind.group/name", the namespace each child of
	// that kind and name was declared with ("" for none).
	namespaces map[string][]string
}

// leftOutOf returns the children left out, objs, of kinds kind names.
// Objects of a kind not in Options.ChildKinds, or without a name, are left
// out of it: a child After one of them is reported as After a child not
// declared.
func leftOutOf(parent object.Object, objs []object.Object, kind func(object.Object) (*childKind, bool)) leftOut {
	l := leftOut{parentNamespace: parent.GetNamespace(), namespaces: map[string][]string{}}
	for _, obj := range objs {
		ck, ok := kind(obj)
		if !ok || obj.GetName() == "" {
			continue
		}
		k := ck.gvk.GroupKind().String() + "/" + obj.GetName()
		l.namespaces[k] = append(l.namespaces[k], obj.GetNamespace())
	}
	return l
}

// names reports whether the dependency of objectID id is a child left out:
// one of its kind and name whose namespace is id's, or none (the parent's
// for a namespaced kind), or any when id is cluster-scoped.
func (l leftOut) names(id string) bool {
	gk, rest, _ := strings.Cut(id, "/")
	gk, _, _ = strings.Cut(gk, "@") // a child's of another cluster, After one of its own
	ns, name, namespaced := strings.Cut(rest, "/")
	if !namespaced {
		ns, name = "", rest
	}
	return slices.ContainsFunc(l.namespaces[gk+"/"+name], func(declared string) bool {
		return !namespaced || declared == ns || declared == "" && ns == l.parentNamespace
	})
}

// requestOf is the request that reconciles parent.
func requestOf(parent object.Object) reconcile.Request {
	return reconcile.Request{Namespace: parent.GetNamespace(), Name: parent.GetName()}
}

// displayName names c for messages: its kind and name, with its namespace
// when not the parent's.
func displayName(parent object.Object, c child) string {
	return displayID(parent, inCluster(objectID(schema.GroupKind{Kind: c.obj.GetKind()}, c.obj.GetNamespace(), c.obj.GetName()), c.target))
}

// displayID names the object of objectID id for messages, as displayName.
func displayID(parent object.Object, id string) string {
	gk, rest, _ := strings.Cut(id, "/")
	gk, cl, _ := strings.Cut(gk, "@")
	kind, _, _ := strings.Cut(gk, ".")
	if cl != "" {
		cl = " in cluster " + cl
	}
	if ns, name, ok := strings.Cut(rest, "/"); ok && ns == parent.GetNamespace() {
		return kind + " " + name + cl
	}
	return kind + " " + rest + cl
}
