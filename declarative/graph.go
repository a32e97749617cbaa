package declarative

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/converge-dev/converge/internal/errtext"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// AfterAnnotation holds, on a child declared with Child.After, the children
// it was applied after (comma-separated kind/namespace/name), so that
// pruning and deletion follow the order after Desired stops declaring it
// and across restarts.
const AfterAnnotation = "converge.dev/after"

// graph is the order and readiness of one reconcile's children, built when
// any of them is a Child. A nil *graph is a parent without one: every
// method then does what converge does without order.
type graph struct {
	// nodes holds one node per child handed to prepare, in order.
	nodes []node
	// excluded holds the objects of children declared with IncludeWhen(false).
	excluded []object.Object
	// vertices holds the children to apply, in apply order (see bind).
	vertices []vertex
	// edges reports whether any child is After another.
	edges bool
	// panicked is the first panic of a ReadyWhen, or nil.
	panicked error
}

// vertex is one child of the graph.
type vertex struct {
	id    string // objectID
	name  string // "Deployment web", for messages
	after []int  // indexes of vertices
	ready func(object.Object) (bool, error)
	// readyWhat names what ready means, when ready is set.
	readyWhat string
	// failed is its FailedWhen, or nil; failedWhat its words.
	failed     func(object.Object) (bool, error)
	failedWhat string
	// reruns is whether it is a Job that runs again each time its TTL
	// deletes it (see RerunAfterTTLReason).
	reruns bool
	state  readiness
	// waitsFor is the index of the vertex it waits for, or -1.
	waitsFor int
	// kind, when set, is what the child waits for to be served: its kind
	// is not (see crdOf).
	kind string
}

// graphOf returns the objects to prepare from declared, Childs unwrapped
// and those left out by IncludeWhen dropped, and the graph of their
// options: nil when no child is a Child.
func graphOf(declared []any) (*graph, []any) {
	if !slices.ContainsFunc(declared, isGraphChild) {
		return nil, declared
	}
	g := &graph{}
	plain := make([]any, 0, len(declared))
	for _, decl := range declared {
		a, adopt := decl.(adoption)
		if adopt {
			decl = a.child
		}
		n := node{}
		if gc, ok := decl.(graphChild); ok && !typednil.Is(gc) {
			n = gc.node()
			if n.excluded {
				g.excluded = append(g.excluded, n.obj)
				continue
			}
			decl = n.obj
			if n.cluster != "" {
				decl = targeted{child: decl, cluster: n.cluster}
			}
		}
		if adopt {
			decl = adoption{child: decl}
		}
		plain = append(plain, decl)
		g.nodes = append(g.nodes, n)
	}
	return g, plain
}

func isGraphChild(decl any) bool {
	if a, ok := decl.(adoption); ok {
		decl = a.child
	}
	_, ok := decl.(graphChild)
	return ok
}

// bind ties the graph to children, prepared from the objects graphOf
// returned (children[i] from nodes[i]), and returns them in apply order:
// each after the children it is After, otherwise in declaration order.
// Children After one left out are left out too. names names a dependency
// (see objectID). The error names the children that break the order.
func (g *graph) bind(parent object.Object, children []child, names dependencyNames) ([]child, error) {
	index := make(map[string]int, len(children))
	for i, c := range children {
		index[c.id()] = i
	}
	// A child left out is not declared: it is never resolved (its kind
	// may not be served), only matched with the dependencies that name it.
	left := leftOutOf(parent, g.excluded, names.kind)
	out := make(map[string]bool, len(g.excluded))
	deps := make([][]string, len(children))
	var errs []error
	for i, n := range g.nodes {
		for _, dep := range n.after {
			id, err := names.id(dep)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s is After a child: %w", displayName(parent, children[i]), err))
				continue
			}
			id = inCluster(id, children[i].target) // a child's own cluster's
			if _, declared := index[id]; !declared && !out[id] {
				if !left.names(id) {
					errs = append(errs, fmt.Errorf("%s is After %s, which is not declared in State.Children", displayName(parent, children[i]), displayID(parent, id)))
					continue
				}
				out[id] = true
			}
			if !slices.Contains(deps[i], id) {
				deps[i] = append(deps[i], id)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Leave out, transitively, the children After one left out.
	for changed := true; changed; {
		changed = false
		for i, c := range children {
			id := c.id()
			if !out[id] && slices.ContainsFunc(deps[i], func(d string) bool { return out[d] }) {
				out[id], changed = true, true
			}
		}
	}
	order, placed, err := applyOrder(parent, children, deps, out, index)
	if err != nil {
		return nil, err
	}
	sorted := make([]child, len(order))
	g.vertices = make([]vertex, len(order))
	for v, i := range order {
		c := children[i]
		vx := vertex{id: c.id(), name: displayName(parent, c), ready: g.nodes[i].ready, readyWhat: g.nodes[i].readyWhat,
			failed: g.nodes[i].failed, failedWhat: g.nodes[i].failedWhat, waitsFor: -1}
		for _, d := range deps[i] {
			vx.after = append(vx.after, placed[d])
		}
		if len(deps[i]) > 0 {
			g.edges = true
			c.setAfter(deps[i])
		}
		g.vertices[v] = vx
		sorted[v] = c
	}
	return sorted, nil
}

// applyOrder orders the children not out, each after its deps (ids of
// children; index maps an id to its child), by Kahn's algorithm taking the
// first ready child in declaration order. placed maps the id of each child
// ordered to its place in order. The error names a cycle.
func applyOrder(parent object.Object, children []child, deps [][]string, out map[string]bool, index map[string]int) (order []int, placed map[string]int, err error) {
	pending := make([]int, len(children)) // deps not placed yet
	var keep []int
	for i, c := range children {
		if out[c.id()] {
			continue
		}
		keep = append(keep, i)
		pending[i] = len(deps[i])
	}
	placed = make(map[string]int, len(keep)) // id -> vertex index
	order = make([]int, 0, len(keep))
	for len(order) < len(keep) {
		next := -1
		for _, i := range keep {
			if pending[i] == 0 {
				next = i
				pending[i] = -1
				break
			}
		}
		if next < 0 {
			return nil, nil, cycleError(parent, children, keep, pending, deps, index)
		}
		id := children[next].id()
		placed[id] = len(order)
		order = append(order, next)
		for _, i := range keep {
			if pending[i] > 0 && slices.Contains(deps[i], id) {
				pending[i]--
			}
		}
	}
	return order, placed, nil
}

// cycleError names a cycle among the children keep holds that could not be
// placed (pending[i] > 0): each of them is After another of them.
func cycleError(parent object.Object, children []child, keep, pending []int, deps [][]string, index map[string]int) error {
	start := -1
	for _, i := range keep {
		if pending[i] > 0 {
			start = i
			break
		}
	}
	seen := map[int]int{} // child -> position in path
	var path []int
	for i := start; ; {
		if at, ok := seen[i]; ok {
			path = append(path[at:], i)
			break
		}
		seen[i] = len(path)
		path = append(path, i)
		for _, d := range deps[i] {
			if j := index[d]; pending[j] > 0 {
				i = j
				break
			}
		}
	}
	names := make([]string, len(path))
	for k, i := range path {
		names[k] = displayName(parent, children[i])
	}
	return fmt.Errorf("%s and %s are After each other (cycle: %s)", names[0], names[1], strings.Join(names, " after "))
}

// setAfter records deps in c's AfterAnnotation, and folds them into its
// hash (the hash of the rest, which prepare computed, and deps), cheaper
// than hashing the whole object again.
func (c *child) setAfter(deps []string) {
	after := strings.Join(deps, ",")
	sum := sha256.Sum256([]byte(c.hash + "\x00" + after))
	c.hash = hex.EncodeToString(sum[:8])
	setMap(c.obj, "annotations", map[string]string{AfterAnnotation: after, AppliedAnnotation: c.hash})
}

// waves returns the indexes of n children in apply order, grouped into waves
// that are applied one after another: a child goes in the wave after the
// last one holding a child it is After, and the children of one wave depend
// on none of each other. A nil graph is one wave.
func (g *graph) waves(n int) [][]int {
	if g == nil {
		if n == 0 {
			return nil
		}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	level := make([]int, len(g.vertices))
	var out [][]int
	for i, v := range g.vertices {
		for _, d := range v.after { // d < i: vertices are in apply order
			level[i] = max(level[i], level[d]+1)
		}
		if level[i] == len(out) {
			out = append(out, nil)
		}
		out[level[i]] = append(out[level[i]], i)
	}
	return out
}

// allowed reports whether the i-th child (in apply order) may be applied:
// every child it is After is ready. Otherwise it records what it waits for.
func (g *graph) allowed(i int) bool {
	if g == nil {
		return true
	}
	v := &g.vertices[i]
	for _, d := range v.after {
		if !g.vertices[d].state.ready {
			v.waitsFor = d
			return false
		}
	}
	return true
}

// observe records the readiness of the i-th child, c, after its apply
// (which returned applyErr), from the cache.
func (g *graph) observe(ctx context.Context, i int, c child, applyErr error) {
	if g == nil {
		return
	}
	v := &g.vertices[i]
	gk := c.kind.gvk.GroupKind()
	switch {
	case errors.Is(applyErr, errReplacing):
		v.state = readiness{what: expectedReadiness(gk, v.readyWhat), why: "its object is being replaced"}
		return
	case applyErr != nil:
		v.state = readiness{failure: failedApply, what: expectedReadiness(gk, v.readyWhat), why: applyCause(applyErr)}
		return
	}
	live, err := c.read(ctx, c.obj.GetNamespace(), c.obj.GetName())
	if err != nil {
		why := ""
		if !apierrors.IsNotFound(err) {
			why = errtext.Of(err)
		}
		v.state = readiness{what: expectedReadiness(gk, v.readyWhat), why: why}
		if why != "" {
			v.state.failure = failedCheck
		}
		return
	}
	if live.GetDeletionTimestamp() != nil {
		// Going away, whatever its status says: applied again once gone.
		v.state = readiness{what: expectedReadiness(gk, v.readyWhat), why: beingDeleted(live)}
		return
	}
	builtin := readinessOf(gk, live)
	if v.ready == nil {
		v.state = builtin
	} else {
		v.state = readiness{what: v.readyWhat}
		v.state.ready = g.call(v, "ReadyWhen", v.ready, live)
		if !v.state.ready && !v.state.failed() && builtin.failure == failedItself {
			v.state.failure, v.state.why = builtin.failure, builtin.why
		}
	}
	if v.failed != nil && !v.state.ready && !v.state.failed() && g.call(v, "FailedWhen", v.failed, live) && !v.state.failed() {
		v.state.failure, v.state.why = failedItself, v.failedWhat
	}
}

// call returns what fn, v's ReadyWhen or FailedWhen (named by method),
// says of live; when it fails or panics, v's state is failedCheck with
// the cause, and the graph keeps the first panic to rethrow.
func (g *graph) call(v *vertex, method string, fn func(object.Object) (bool, error), live object.Object) bool {
	ok, err, panicked := callReady(fn, live)
	switch {
	case panicked != nil:
		v.state.failure, v.state.why = failedCheck, fmt.Sprintf("its %s panicked: %v", method, panicked.value)
		if g.panicked == nil {
			g.panicked = fmt.Errorf("declarative: %s of %s panicked: %v\n%s", method, v.name, panicked.value, panicked.stack)
		}
	case err != nil:
		v.state.failure, v.state.why = failedCheck, errtext.Of(err)
	}
	return ok
}

// recoveredPanic is a recovered panic of a ReadyWhen or of Desired.
type recoveredPanic struct {
	value any
	stack []byte
}

func callReady(ready func(object.Object) (bool, error), live object.Object) (ok bool, err error, p *recoveredPanic) {
	defer func() {
		if r := recover(); r != nil {
			p = &recoveredPanic{value: r, stack: debug.Stack()}
		}
	}()
	ok, err = ready(live)
	return ok, err, nil
}

// rethrow panics with the first ReadyWhen panic, if there was one, for the
// framework to count and report it as a panic of the reconcile.
func (g *graph) rethrow() {
	if g != nil && g.panicked != nil {
		panic(g.panicked)
	}
}

// dependedOn returns the objectIDs that objs, a parent's children (of
// kinds kindOf names), are After: those must outlive them. A retained
// child holds nothing: it outlives every other child anyway.
func dependedOn(objs []object.Object) map[string]bool {
	var out map[string]bool
	for _, obj := range objs {
		after := obj.GetAnnotations()[AfterAnnotation]
		if after == "" || retained(obj) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		for id := range strings.SplitSeq(after, ",") {
			out[id] = true
		}
	}
	return out
}

// heldChildren returns the function prune asks, for each child it would
// delete, which other child parent owns that still exists (being deleted or
// not) is After it, if any: such a child is deleted by a later reconcile,
// which the other one's deletion brings about. An object parent does not
// own (a hand-made copy carrying its labels and AfterAnnotation) holds
// nothing. It lists parent's children the first time it is called only, so
// a reconcile that prunes nothing lists nothing more.
func (d *Declarative[T]) heldChildren(ctx context.Context, parent object.Object) func(*site, *childKind, object.Object) (string, error) {
	held := map[string]map[string]string{} // by cluster
	return func(at *site, ck *childKind, obj object.Object) (string, error) {
		if held[at.name] == nil {
			byID := map[string]string{}
			for _, k := range d.sortedKinds() {
				objs, err := d.labelledIn(ctx, at, k, parent)
				if err != nil {
					return "", err
				}
				for _, o := range objs {
					if !d.ownsIn(at.name, parent, o) {
						continue
					}
					for id := range dependedOn([]object.Object{o}) {
						if _, ok := byID[id]; !ok {
							byID[id] = displayID(parent, objectIn(k.gvk.GroupKind(), at.name, o.GetNamespace(), o.GetName()))
						}
					}
				}
			}
			held[at.name] = byID
		}
		return held[at.name][objectIn(ck.gvk.GroupKind(), at.name, obj.GetNamespace(), obj.GetName())], nil
	}
}
