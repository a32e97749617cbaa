package declarative

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// Annotations converge puts on children declared with a policy.
const (
	// RetainAnnotation ("true") marks a child declared with Child.Retain:
	// converge releases it rather than deleting it (and so releases any
	// child of the parent that carries it).
	RetainAnnotation = "converge.dev/retain"
	// RunOnceAnnotation, on a child declared with Child.RunOnce, holds the
	// hash of its declaration, which the parent's RanAnnotation records
	// once the child was ready.
	RunOnceAnnotation = "converge.dev/run-once"
)

// ReplaceWhenImmutable makes converge replace c's object when the API
// server refuses to apply c over it because c changes a field that cannot
// change once set (422 Invalid, with a cause saying the field is
// immutable: a Job's pod template, a Service's clusterIP, a StatefulSet's
// selector). converge deletes the object, with foreground propagation (what
// the object owns goes first: a Job's pods stop before the new Job starts
// any), on condition that it still is the object it tried to apply to, and
// creates it again once it is gone. The replacement keeps c's place in the
// order: c is not ready meanwhile (the parent's Ready condition says it is
// being replaced), and the children After it, left as they are, wait for
// the new object to be ready, as they did for the old one. An apply
// refused for another cause is reported as without ReplaceWhenImmutable.
//
// Zero (not called) means an apply the server refuses fails c: the
// parent's Ready condition says so with the server's cause, the reconcile
// fails and is retried with backoff, and the object is left as it is.
// ReplaceWhenImmutable acts only while the object exists: a Job its
// ttlSecondsAfterFinished deleted is created again whatever the policy,
// unless c is also RunOnce (see RunOnce); with RunOnce, a change of
// content while the finished Job still exists replaces it at once.
// Naming the object after its content (a hash of what cannot change, in its
// name) is the other way: a new object next to the old one, which is
// pruned once the children After it moved on, and never a moment without
// one. See the README for when to use which.
func (c *Child[C]) ReplaceWhenImmutable() *Child[C] {
	c.policy.replace = true
	return c
}

// RunOnce makes c a child that is created once per content: once c has
// been ready (its ReadyWhen, or its kind's built-in readiness: a Job
// Complete) with its current content, converge does not create it again
// when it disappears (a Job deleted by its ttlSecondsAfterFinished, or by
// hand), and the children After it count it as ready, until its content
// changes. Its content is what c declares, its order (After) left out.
//
// converge records the runs in the parent's RanAnnotation, so that a
// restart does not run c again, and marks c's object with
// RunOnceAnnotation, so that a child seen ready only in its last state
// before its deletion counts too. While the object exists c is applied as
// any child: drift is reverted. A run-once child no longer declared (or
// left out by IncludeWhen) is forgotten: declared again, it runs again.
//
// A Job with spec.ttlSecondsAfterFinished wants RunOnce: without it, each
// time the TTL-after-finished controller deletes the finished Job, converge
// creates it again and it runs again (the parent gets a Warning Event of
// reason RerunAfterTTLReason). With RunOnce and without
// ReplaceWhenImmutable, a change of content while the finished Job still
// exists is refused by the API server (its pod template is immutable: the
// parent's Ready condition says so) until the TTL deletes it, when the new
// Job runs; add ReplaceWhenImmutable to run it at once.
//
// Zero (not called) means c is created again whenever it is missing.
func (c *Child[C]) RunOnce() *Child[C] {
	c.policy.runOnce = true
	return c
}

// Retain keeps c's object when its parent is deleted or no longer declares
// c: converge releases it instead of deleting it, removing the labels and
// annotations it put on it (and any owner reference to the parent), so
// that neither converge nor the garbage collector deletes it later. It is
// then nobody's: a parent that declares it again (the same parent
// deleted and created again, say) finds someone else's object there (a
// conflict: its Ready condition says ChildFailed, with a ChildConflict
// Event), unless it wraps the whole Child in Adopt, which takes it back:
//
//	declarative.Adopt(declarative.NewChild(pvc).Retain())
//
// Use it for what holds data: a PersistentVolumeClaim, a database. Retain
// governs what converge deletes only: a Job's ttlSecondsAfterFinished, or
// a user, still deletes the object.
//
// While its parent exists a retained child carries no owner reference: it
// is linked to the parent by its labels and the parent's ledger
// (LedgerAnnotation), as a child in another namespace is, and the parent
// gets converge's finalizer, which is removed once every retained child is
// released. So the garbage collector never takes it for the parent's, even
// when the parent is deleted with foreground propagation, and a parent
// whose deletion converge does not see (converge stopped, its finalizer
// removed by hand) leaves it in place.
//
// Zero (not called) means c is deleted with its parent, and when no longer
// declared.
func (c *Child[C]) Retain() *Child[C] {
	c.policy.retain = true
	return c
}

// childPolicy is what ReplaceWhenImmutable, RunOnce and Retain set.
type childPolicy struct{ replace, runOnce, retain bool }

// plainGraph returns the graph of n children none of which is a Child.
func plainGraph(n int) *graph { return &graph{nodes: make([]node, n)} }

// withPolicies gives children, prepared from g's nodes (children[i] from
// nodes[i]), the policies their Childs declare, and reports whether a
// retained child needs converge's finalizer. A retained child loses its
// owner reference and gets RetainAnnotation; a run-once child gets
// RunOnceAnnotation; each change is folded into the child's hash.
func (g *graph) withPolicies(children []child) (linked bool) {
	for i := range children {
		c := &children[i]
		if c.absent {
			continue
		}
		c.policy, c.content = g.nodes[i].policy, c.hash
		if c.policy.runOnce {
			c.fold(RunOnceAnnotation, c.content)
		}
		if c.policy.retain {
			c.obj.SetOwnerReferences(nil)
			c.fold(RetainAnnotation, "true")
			linked = true
		}
	}
	return linked
}

// fold sets annotation to value on c and folds it into c's hash, as
// setAfter does.
func (c *child) fold(annotation, value string) {
	sum := sha256.Sum256([]byte(c.hash + "\x00" + annotation + "=" + value))
	c.hash = hex.EncodeToString(sum[:8])
	setMap(c.obj, "annotations", map[string]string{annotation: value, AppliedAnnotation: c.hash})
}

// skip reports whether children[i], c, is not to be applied whatever the
// order says: its kind is not served (its parent then waits for it), or it
// is a run-once child that ran for its content and is gone. A run-once
// child that ran counts as ready, gone or not.
func (d *Declarative[T]) skip(ctx context.Context, parent T, g *graph, i int, c child) bool {
	switch {
	case c.away != "": // its parent waits for the cluster (siteOf)
		g.vertices[i].kind = c.away
		return true
	case c.absent:
		d.kindWaits.add(c.kind.gvk.GroupKind(), requestOf(parent))
		g.vertices[i].kind = crdOf(c.kind.gvk)
		return true
	case c.policy.runOnce:
		v := &g.vertices[i]
		ran, gone := d.ranAlready(ctx, parent, c, v.ready)
		if ran {
			v.state = readiness{ready: true, what: expectedReadiness(c.kind.gvk.GroupKind(), v.readyWhat)}
		}
		return ran && gone
	}
	return false
}
