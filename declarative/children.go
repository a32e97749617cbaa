package declarative

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// child is one desired child, ready to apply.
type child struct {
	obj  *unstructured.Unstructured
	kind *childKind
	hash string
	// adopt is whether the child was declared with Adopt.
	adopt bool
	// absent is set when the API server does not serve the child's kind
	// (see served.go), or its cluster cannot be used (away): the child
	// waits for it, and has no hash.
	absent bool
	// policy is the child's Child.ReplaceWhenImmutable, RunOnce and Retain;
	// content is the hash of its declaration before the policies and its
	// order changed it, which a run-once child's runs are recorded under.
	policy  childPolicy
	content string
	// target names the cluster the child is in, "" for the parent's (see
	// Child.InCluster), and at is that cluster. away, when set, says why
	// it cannot be used now ("cluster edge-1 (not engaged)"), and at is
	// then nil: the child waits for it, and has no hash.
	target string
	at     *site
	away   string
}

func (c child) String() string {
	if c.target != "" {
		return fmt.Sprintf("%s %s in cluster %s", c.obj.GetKind(), key(c.obj.GetNamespace(), c.obj.GetName()), c.target)
	}
	return fmt.Sprintf("%s %s", c.obj.GetKind(), key(c.obj.GetNamespace(), c.obj.GetName()))
}

// recordedUID is the change to a parent's ledger that records c's object
// as uid and drops its claim.
func recordedUID(c child, uid types.UID) map[string]string {
	return map[string]string{c.id(): string(uid), claimKey(c.id()): ""}
}

// id names c in its parent's ledger (see objectIn).
func (c child) id() string {
	return objectIn(c.kind.gvk.GroupKind(), c.target, c.obj.GetNamespace(), c.obj.GetName())
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// prepare turns the declared children into unstructured objects carrying
// ownership, labels and the hash of their content. linked reports children
// tied by labels only, which need the finalizer to be cleaned up. Errors
// in the declaration itself (see invalidDeclaration) are told apart from
// others, which trying again may clear.
func (d *Declarative[T]) prepare(ctx context.Context, parent object.Object, declared []any) (out []child, linked bool, err error) {
	seen := map[string]bool{}
	var errs []error
	for i, decl := range declared {
		a, adopt := decl.(adoption)
		if adopt {
			decl = a.child
		}
		target := ""
		if t, ok := decl.(targeted); ok {
			decl, target = t.child, t.cluster
		}
		u, err := d.toUnstructured(decl)
		if err != nil {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %d (%T): %w", i, decl, err)))
			continue
		}
		gvk := u.GroupVersionKind()
		ck, ok := d.children[gvk.GroupKind()]
		if !ok {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s %s: kind %v is not in declarative.Options.ChildKinds; list it so converge watches and prunes it", gvk.Kind, u.GetName(), gvk.GroupKind())))
			continue
		}
		if u.GetName() == "" {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %d (%s): metadata.name is required", i, gvk.Kind)))
			continue
		}
		c := child{obj: u, kind: ck, adopt: adopt, target: target}
		at, namespaced, err := d.locate(parent, &c)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case c.absent:
			if id := c.id(); !seen[id] {
				seen[id] = true
				out = append(out, c)
			}
			continue
		}
		c.at = at
		switch {
		case namespaced && u.GetNamespace() == "":
			u.SetNamespace(parent.GetNamespace())
		case !namespaced:
			u.SetNamespace("")
		}
		if err := placed(ctx, parent, c, namespaced); err != nil {
			errs = append(errs, invalidDeclaration(err))
			continue
		}
		id := c.id()
		if seen[id] {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s is declared twice", c)))
			continue
		}
		seen[id] = true

		if at.remote() || !d.own(parent, u) {
			linked = true
		}
		setMap(u, "labels", map[string]string{ParentUIDLabel: string(parent.GetUID()), ManagerLabel: labelValue(d.opts.FieldManager)})
		setMap(u, "annotations", map[string]string{ParentAnnotation: key(parent.GetNamespace(), parent.GetName())})
		if err := inSelection(c); err != nil {
			errs = append(errs, invalidDeclaration(err))
			continue
		}
		if c.hash, err = hashOf(u.Object); err != nil {
			errs = append(errs, invalidDeclaration(fmt.Errorf("child %s: %w", gvk.Kind, err)))
			continue
		}
		setMap(u, "annotations", map[string]string{AppliedAnnotation: c.hash})
		out = append(out, c)
	}
	return out, linked, errors.Join(errs...)
}

// locate finds the cluster of c (see Child.InCluster), and whether its kind
// is namespaced there. A child whose cluster cannot be used now, or whose
// kind is not served, waits: it comes back absent (its namespace the
// parent's when it has none: most kinds are namespaced), and c.away says
// why for a cluster. A child in another cluster with owner references is
// an invalid declaration.
func (d *Declarative[T]) locate(parent object.Object, c *child) (*site, bool, error) {
	u := c.obj
	if c.target != "" && len(u.GetOwnerReferences()) > 0 {
		if u.GetNamespace() == "" {
			u.SetNamespace(parent.GetNamespace()) // for the message
		}
		return nil, false, invalidDeclaration(fmt.Errorf("child %s carries owner references, which cannot cross clusters: cluster %s's garbage collector would delete it, as its owner is not there; leave them out (converge links the child to its parent by labels and the parent's ledger)", c, c.target))
	}
	if c.target != "" && d.sites.spread {
		return nil, false, invalidDeclaration(fmt.Errorf("child %s: %w", c, spreadRefusal(c.target)))
	}
	at, away, err := d.siteOf(c.target)
	if err != nil {
		return nil, false, fmt.Errorf("child %s: %w", c, err)
	}
	namespaced := false
	if at != nil {
		namespaced, err = d.namespacedIn(at, c.kind)
	}
	if away != "" || at == d.local && notServed(c.kind, err) {
		if u.GetNamespace() == "" {
			u.SetNamespace(parent.GetNamespace())
		}
		c.absent, c.away = true, away
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("child %s: %w", c, err)
	}
	return at, namespaced, nil
}

// placed checks that the namespace of u, a child of a kind namespaced or
// not, is one the controller sees: inside the manager's cache and, in a
// controller sharded by namespace, parent's own.
func placed(ctx context.Context, parent object.Object, c child, namespaced bool) error {
	ck, u := c.kind, c.obj
	gvk := u.GroupVersionKind()
	if c.at.remote() {
		if cached := c.at.cl.Target().Namespace; namespaced && cached != "" && u.GetNamespace() != cached {
			return fmt.Errorf("%s: namespace %q is outside what converge sees of cluster %s, which is limited to namespace %q (cluster.Target.Namespace); declare it in %q",
				c, u.GetNamespace(), c.target, cached, cached)
		}
		return nil // a sharded controller shards the parent's cluster only
	}
	if cached := ck.cached.Selection().Namespace; namespaced && cached != "" && u.GetNamespace() != cached {
		// The cache would never show it: drift would go unseen and
		// the child would be neither pruned nor finalized.
		return fmt.Errorf("child %s %s: namespace %q is outside the manager's cache, which holds namespace %q only (framework.Options.Cache.Namespace); declare it in %q or cache its namespace",
			gvk.Kind, key(u.GetNamespace(), u.GetName()), u.GetNamespace(), cached, cached)
	}
	if _, of, sharded := sharding.BucketFrom(ctx); sharded && of.By == sharding.ByNamespace && namespaced && u.GetNamespace() != parent.GetNamespace() && ck.perNamespace(parent) {
		// Only the member holding the parent's bucket reconciles it,
		// and its controller reads the kind of its buckets'
		// namespaces only, whatever informer reads go to.
		return fmt.Errorf("child %s %s: namespace %q is not its parent's, and the controller is sharded by namespace (sharding.Options.Buckets.By): the member reconciling the parent sees only the namespaces of its buckets, so it might not see the child to revert drift or prune it; declare it in %q",
			gvk.Kind, key(u.GetNamespace(), u.GetName()), u.GetNamespace(), parent.GetNamespace())
	}
	return nil
}

// own makes u parent's by an owner reference where Kubernetes allows one
// (same namespace, or a cluster-scoped parent), and reports whether it did;
// a child it did not is linked by labels only.
func (d *Declarative[T]) own(parent object.Object, u *unstructured.Unstructured) bool {
	if parent.GetNamespace() != "" && u.GetNamespace() != parent.GetNamespace() {
		return false
	}
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: d.parentGVK.GroupVersion().String(), Kind: d.parentGVK.Kind,
		Name: parent.GetName(), UID: parent.GetUID(),
		Controller: new(true), BlockOwnerDeletion: new(true),
	}})
	return true
}

// toUnstructured converts a declared child to the body of its apply: an
// unstructured child as it is, a typed one (an API object or an apply
// configuration) with the fields it sets only (see setFields), and either
// without status and server-set metadata.
func (d *Declarative[T]) toUnstructured(decl any) (*unstructured.Unstructured, error) {
	var m map[string]any
	if typednil.Is(decl) {
		if decl == nil {
			return nil, errors.New("nil child")
		}
		return nil, errors.New("nil pointer: declare a child object, or leave it out")
	}
	switch o := decl.(type) {
	case *unstructured.Unstructured:
		m = runtime.DeepCopyJSON(o.Object)
	default:
		v, err := setFields(decl)
		if err != nil {
			return nil, err
		}
		var ok bool
		if m, ok = v.(map[string]any); !ok {
			return nil, fmt.Errorf("a %T is not a JSON object", decl)
		}
		if ro, ok := decl.(runtime.Object); ok && (m["kind"] == nil || m["apiVersion"] == nil) {
			gvks, _, err := d.mgr.Scheme().ObjectKinds(ro)
			if err != nil {
				return nil, fmt.Errorf("not registered in the manager's scheme: %w", err)
			}
			m["apiVersion"], m["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
		}
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink"} {
			delete(md, f)
		}
	}
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, errors.New("apiVersion and kind are required")
	}
	return u, nil
}

// dropNulls removes null values, recursively. Empty objects stay: some carry
// meaning by their presence alone (a volume's emptyDir: {}).
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(x)
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

// inSelection checks that the cache's informer for ck, which may hold a
// selection of its kind only (framework.Options.Cache.ByKind), holds u: a
// child it did not show could not be checked for drift, pruned or found on
// finalize. Field selectors can be checked on metadata.name and
// metadata.namespace only; a child of a kind selected on other fields is
// rejected, as whether the cache holds it cannot be told before it exists.
func inSelection(c child) error {
	ck, u := c.kind, c.obj
	if c.at.remote() {
		return nil // another cluster caches the children by ManagerLabel (memberSelection)
	}
	sel := ck.cached.Selection()
	child := fmt.Sprintf("%s %s", u.GetKind(), key(u.GetNamespace(), u.GetName()))
	if sel.Labels != nil && !sel.Labels.Matches(labels.Set(u.GetLabels())) {
		return fmt.Errorf("child %s: its labels do not match the selector %q the manager's cache selects %s objects with (framework.Options.Cache.ByKind), so converge could not see it to revert drift or prune it; give the child labels the selector matches, or widen the selection",
			child, sel.Labels.String(), ck.gvk.Kind)
	}
	if sel.Fields == nil || sel.Fields.Empty() {
		return nil
	}
	for _, r := range sel.Fields.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return fmt.Errorf("child %s: the manager's cache selects %s objects by field %s (selector %q, framework.Options.Cache.ByKind), which converge cannot check before the child exists; select children by labels, metadata.name or metadata.namespace",
				child, ck.gvk.Kind, r.Field, sel.Fields.String())
		}
	}
	if !sel.Fields.Matches(fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}) {
		return fmt.Errorf("child %s: it does not match the field selector %q the manager's cache selects %s objects with (framework.Options.Cache.ByKind), so converge could not see it to revert drift or prune it",
			child, sel.Fields.String(), ck.gvk.Kind)
	}
	return nil
}

func setMap(u *unstructured.Unstructured, field string, add map[string]string) {
	md, _ := u.Object["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		u.Object["metadata"] = md
	}
	cur, _ := md[field].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
		md[field] = cur
	}
	for k, v := range add {
		cur[k] = v
	}
}

func hashOf(obj map[string]any) (string, error) {
	b, err := json.Marshal(obj) // encoding/json sorts map keys: stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// labelValue makes s a valid label value (63 characters, alphanumerics and -_.).
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

func (d *Declarative[T]) namespaced(ck *childKind) (bool, error) { return d.namespacedIn(d.local, ck) }

// namespacedIn reports whether ck's kind is namespaced in the cluster at.
func (d *Declarative[T]) namespacedIn(at *site, ck *childKind) (bool, error) {
	m, err := at.mapper.RESTMapping(ck.gvk.GroupKind(), ck.gvk.Version)
	if err != nil {
		if at.remote() {
			return false, fmt.Errorf("kind %v in cluster %s: %w", ck.gvk, at.name, err)
		}
		return false, err
	}
	if !at.remote() {
		ck.served.Store(true) // mapped: served (see served.go)
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// maxApplies is how many children one reconcile applies at once.
const maxApplies = 8

// noObjectVersion is a resourceVersion no stored object has (etcd revisions
// count up from 1 and never reach it). An apply carrying it creates a
// missing object and fails with a conflict when the object exists.
const noObjectVersion = "18446744073709551615"

// mergeKeys are the fields that key the associative lists of Kubernetes
// objects (x-kubernetes-list-map-keys): containers, env, volumes and most
// others by name, ports, volume mounts and devices by path, conditions by
// type, owner references by uid.
var mergeKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "type", "ip", "uid"}

// perNamespace reports whether the children of this kind are read from
// the buckets of a ring sharded by namespace, for parent, a namespaced
// object: the cache then holds, of parent's children, those in parent's
// namespace only.
func (ck *childKind) perNamespace(parent object.Object) bool {
	b, ok := hooks.Routed(ck.cached)
	return ok && b.By == sharding.ByNamespace && parent.GetNamespace() != ""
}

// sortedKinds returns the child kinds ordered by kind, so that pruning visits
// them in the same order on every reconcile.
func (d *Declarative[T]) sortedKinds() []*childKind {
	return slices.SortedFunc(maps.Values(d.children), func(a, b *childKind) int {
		return cmp.Compare(a.gvk.String(), b.gvk.String())
	})
}

// parentOf maps a child to its parent through the labels converge set.
func (d *Declarative[T]) parentOf(child object.Object) []reconcile.Request {
	if child.GetLabels()[ManagerLabel] != labelValue(d.opts.FieldManager) {
		return nil
	}
	ref := child.GetAnnotations()[ParentAnnotation]
	if ref == "" {
		return nil
	}
	return []reconcile.Request{parentRequest(ref)}
}

// parentRequest is the parent a ParentAnnotation value names.
func parentRequest(ref string) reconcile.Request {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return reconcile.Request{Name: ref}
	}
	return reconcile.Request{Namespace: ns, Name: name}
}

// objectRef returns an unstructured stub naming parent, for writes.
func (d *Declarative[T]) objectRef(parent object.Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(d.parentGVK)
	u.SetNamespace(parent.GetNamespace())
	u.SetName(parent.GetName())
	return u
}
