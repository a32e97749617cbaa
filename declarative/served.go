package declarative

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// Optional child kinds.
//
// A child kind not in Options.RequiredKinds is watched while the API
// server serves it (framework.WhenServed): until then, and again once it
// no longer does (its CRD deleted), the controller runs without it. A kind
// is known to be served once its source started, or a reconcile found its
// REST mapping (childKind.served), until its source finds it gone; while
// it is not, it has no objects, so listing its children finds none without
// asking the cache, which would wait for an informer that cannot sync. A
// declared child of a kind not served waits for it (child.absent), and its
// parent is remembered (kindWaits) and reconciled again once the source
// starts; a parent whose child of it could not be applied as it went away
// is remembered too, and reconciled again once the source finds it gone.

// servedKind is called by the source of ck once the kind is served and
// watched (serving), and once the API server no longer serves it (its
// CRD deleted): from then on its children are listed, or not, and the
// parents that waited for it, or whose children of it could not be
// applied as it went away, are reconciled again: they apply their
// children of the kind, or say that they wait for it.
func (d *Declarative[T]) servedKind(ck *childKind) func(serving bool) []reconcile.Request {
	return func(serving bool) []reconcile.Request {
		ck.served.Store(serving)
		return d.kindWaits.take(ck.gvk.GroupKind())
	}
}

// goneKind notes parent for ck's kind when err, of an apply of a child of
// it, says that the API server may no longer serve it (a resource not
// found, or refused while its CRD is being deleted): when the kind is
// found gone, parent is reconciled again, and then waits for it.
func (d *Declarative[T]) goneKind(parent object.Object, ck *childKind, err error) {
	if ck.required || !(apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)) {
		return
	}
	d.kindWaits.add(ck.gvk.GroupKind(), requestOf(parent))
}

// isServed reports whether the API server is known to serve ck's kind:
// its source started watching it, a reconcile found its REST mapping, or
// a controller sharded by namespace reads it per held bucket, which it
// does only for kinds served when the controller was built.
func (ck *childKind) isServed() bool {
	if ck.served.Load() {
		return true
	}
	_, routed := hooks.Routed(ck.cached)
	return routed
}

// notServed reports whether err, from the REST mapper, says that the API
// server does not serve ck's kind, and ck is optional: its children then
// wait for it.
func notServed(ck *childKind, err error) bool {
	return err != nil && !ck.required && meta.IsNoMatchError(err)
}

// crdOf names what a child of kind gvk waits for while the API server does
// not serve gvk, for messages: the CustomResourceDefinition of the kind (its
// name's plural guessed from the kind, as client-go guesses it, for the
// kind is not there to say), or, for the groups of Kubernetes itself
// (those client-go knows), which have none, the kind.
func crdOf(gvk schema.GroupVersionKind) string {
	if clientgoscheme.Scheme.IsGroupRegistered(gvk.Group) {
		return fmt.Sprintf("kind %s %s to be served", gvk.Kind, gvk.GroupVersion())
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return fmt.Sprintf("CustomResourceDefinition %s.%s (kind %s is not served)", plural.Resource, gvk.Group, gvk.GroupKind())
}

// waits remembers, for each K (an optional child kind not served yet, a
// cluster not usable now), the parents whose last reconcile declared a
// child waiting for it. It is safe for concurrent use. An entry is dropped
// when it is taken (the kind served, the cluster ready) and when the
// parent is deleted.
type waits[K comparable] struct {
	mu sync.Mutex
	// byKey maps a K to the parents waiting for it; mu guards it.
	byKey map[K]map[reconcile.Request]bool
}

// kindWaits are the parents waiting for a kind to be served.
type kindWaits = waits[schema.GroupKind]

// add records that parent waits for k.
func (w *waits[K]) add(k K, parent reconcile.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey == nil {
		w.byKey = map[K]map[reconcile.Request]bool{}
	}
	if w.byKey[k] == nil {
		w.byKey[k] = map[reconcile.Request]bool{}
	}
	w.byKey[k][parent] = true
}

// take returns the parents waiting for k, and forgets them.
func (w *waits[K]) take(k K) []reconcile.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Collect(maps.Keys(w.byKey[k]))
	delete(w.byKey, k)
	return out
}

// forget drops parent, which is gone, from every K.
func (w *waits[K]) forget(parent reconcile.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, parents := range w.byKey {
		delete(parents, parent)
	}
}

// requiredKinds returns the kinds of examples.
func requiredKinds(examples []object.Object, kindOf func(object.Object) (schema.GroupVersionKind, error)) map[schema.GroupKind]bool {
	out := make(map[schema.GroupKind]bool, len(examples))
	for _, ex := range examples {
		if gvk, err := kindOf(ex); err == nil {
			out[gvk.GroupKind()] = true
		}
	}
	return out
}
