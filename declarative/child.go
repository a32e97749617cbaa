package declarative

import (
	"fmt"

	"github.com/converge-dev/converge/object"
)

// Child is a child of State.Children with an order and a readiness: the
// children it is applied after, when it counts as ready, and whether it is
// declared at all. Build one with NewChild and put it in State.Children in
// place of the object; each method returns the Child, so a declaration reads
// as one expression:
//
//	declarative.NewChild(web).After(migrate).ReadyWhen("serving", func(d *appsv1.Deployment) bool { ... })
//
// A child is applied only once every child it is After exists and is ready;
// until then it is left as it is (neither created nor changed nor pruned).
// Children are deleted (pruned, or on the parent's deletion) in reverse: an
// object is deleted only once every child After it is gone from the API
// server. When any child of a parent is a Child, the parent's status gets a
// Ready condition summing up all its children (see the package
// documentation). A Child with no options behaves as the bare object.
//
// A Child is a declaration, read once by the reconcile it is returned to:
// build a new one in each Desired.
type Child[C object.Object] struct {
	obj        C
	after      []object.Object
	ready      func(live C) bool
	readyWhat  string
	failed     func(live C) bool
	failedWhat string
	excluded   bool
	policy     childPolicy // see policy.go
	cluster    string      // see InCluster
}

// NewChild returns obj as a Child, with no options: to be applied at once,
// ready as its kind's built-in readiness says, always declared. obj is a
// typed object or an *unstructured.Unstructured, as in State.Children
// (client-go apply configurations cannot be ordered).
func NewChild[C object.Object](obj C) *Child[C] { return &Child[C]{obj: obj} }

// After makes c wait for deps: c is applied only once each of them exists
// and is ready, and deleted before any of them. Each dep names another child
// of the same State by its kind, namespace (the parent's when empty, for
// namespaced kinds) and name: pass the object declared, or any object of
// that kind and name. A dep not declared in State.Children, a dep of a kind
// not in Options.ChildKinds, and a cycle are errors of the reconcile. A dep
// declared with IncludeWhen(false) leaves c out too. Calls add up; zero
// deps means c waits for nothing.
func (c *Child[C]) After(deps ...object.Object) *Child[C] {
	c.after = append(c.after, deps...)
	return c
}

// ReadyWhen replaces the built-in readiness of c's kind with ready, called
// with c's object as the cache holds it (status included; shared with the
// cache: do not modify it) each time the parent is reconciled after c is
// applied. what says in a word or two what ready means, as the built-in
// readiness says Complete or Available: the parent's Ready condition reads
// "Deployment web waits for Job migrate (succeeded)" for a Job migrate
// ready when "succeeded". Empty means "ready".
//
// C must be the type the cache holds for c's kind, the type of its example
// in Options.ChildKinds. A ready that panics is recovered: c counts as
// failed, the parent's Ready condition says so, and the reconcile then
// panics on to the framework, which counts, logs and retries it as any
// reconcile panic. A nil ready means the built-in readiness (see the
// package documentation), and what is then ignored.
func (c *Child[C]) ReadyWhen(what string, ready func(live C) bool) *Child[C] {
	c.ready, c.readyWhat = ready, what
	return c
}

// FailedWhen says when c has failed for good: failed is called, as a
// ReadyWhen is, with c's object as the cache holds it (status included;
// shared with the cache: do not modify it) each time the parent is
// reconciled while c is applied and not ready. Once it returns true, c
// counts as failed rather than waiting: the parent's Ready condition is
// False with reason ChildFailedReason and reads "Deployment web failed
// (image cannot be pulled)" for what "image cannot be pulled", and the
// reconcile notes the same Blocker, which converge explain and the debug
// page show as "child failed". Children After c keep waiting for it. It
// turns back into a wait, or ready, as soon as failed returns false. what
// says in a few words what went wrong; empty means the message says only
// "failed".
//
// FailedWhen adds to the failures the built-in readiness recognises (a
// Job's Failed condition, a Deployment's Progressing condition False with
// reason ProgressDeadlineExceeded, a Pod's phase Failed, a
// PersistentVolumeClaim's phase Lost), which apply with or without a
// ReadyWhen; a child that is ready has not failed. C must be the type the
// cache holds for c's kind, as for ReadyWhen. A failed that panics is
// recovered and handled as a ReadyWhen's panic. A nil failed means the
// built-in failures only, and what is then ignored.
func (c *Child[C]) FailedWhen(what string, failed func(live C) bool) *Child[C] {
	c.failed, c.failedWhat = failed, what
	return c
}

// IncludeWhen declares c only when include holds. A child left out is
// pruned, as any child no longer declared, after the children that depend
// on it; a child After it is left out too. The zero Child is included.
func (c *Child[C]) IncludeWhen(include bool) *Child[C] {
	c.excluded = !include
	return c
}

// node returns c without its type parameter.
func (c *Child[C]) node() node {
	n := node{obj: c.obj, after: c.after, excluded: c.excluded, policy: c.policy, cluster: c.cluster}
	if c.ready != nil {
		n.readyWhat = c.readyWhat
		if n.readyWhat == "" {
			n.readyWhat = "ready"
		}
		n.ready = untyped("ReadyWhen", c.ready)
	}
	if c.failed != nil {
		n.failed, n.failedWhat = untyped("FailedWhen", c.failed), c.failedWhat
	}
	return n
}

// untyped returns fn, the function of the Child method named method, as a
// function of any object, which fails for one that is not a C.
func untyped[C object.Object](method string, fn func(live C) bool) func(object.Object) (bool, error) {
	return func(live object.Object) (bool, error) {
		l, ok := live.(C)
		if !ok {
			return false, fmt.Errorf("%s takes a %T, but the cache holds a %T: make its example in Options.ChildKinds a %T, or take a %T", method, *new(C), live, *new(C), live)
		}
		return fn(l), nil
	}
}

// node is a Child without its type parameter.
type node struct {
	obj   object.Object
	after []object.Object
	ready func(live object.Object) (bool, error) // nil: built-in readiness
	// readyWhat names what ready means, for messages; set with ready.
	readyWhat string
	failed    func(live object.Object) (bool, error) // nil: built-in failures only
	// failedWhat names what went wrong when failed is true, for messages.
	failedWhat string
	excluded   bool
	policy     childPolicy
	// cluster is the cluster InCluster put the child in, "" for the
	// parent's.
	cluster string
}

// graphChild is what State.Children holds for a Child of any type.
type graphChild interface{ node() node }

var _ graphChild = (*Child[object.Object])(nil)
