package declarative

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// RanAnnotation, on a parent, records the run-once children (see
// Child.RunOnce) that have been ready for their current content: the
// parent's own UID, then one "HASH=Kind.group/namespace/name" per child,
// HASH being the child's RunOnceAnnotation, separated by spaces. A child
// it records is not created again while its content is unchanged. Like
// LedgerAnnotation, one that does not start with the parent's UID (copied
// with another parent's YAML) records nothing. converge writes it with the
// field manager FieldManager + "-ran".
const RanAnnotation = "converge.dev/ran"

// runs remembers, per parent, what RanAnnotation records and this process
// wrote (until the cache's copy of the parent shows it), and the last state
// seen of each run-once child, so that a child whose last event made it
// ready and gone before a reconcile read it counts as ready. It is safe for
// concurrent use.
type runs struct {
	// pending holds the entries this process wrote that the annotation may
	// not show yet: child ID to hash, "" for an entry removed.
	pending unshown

	mu sync.Mutex
	// last maps a parent's UID to the last state seen of each of its
	// run-once children, by child ID (the cached object: shared, read
	// only). mu guards it.
	last map[types.UID]map[string]object.Object
}

// parseRan returns the entries of parent's RanAnnotation, child ID to
// hash; none when the annotation is not parent's own.
func parseRan(parent metav1.Object) map[string]string {
	fields := strings.Fields(parent.GetAnnotations()[RanAnnotation])
	out := map[string]string{}
	if len(fields) == 0 || fields[0] != string(parent.GetUID()) {
		return out
	}
	for _, f := range fields[1:] {
		if hash, id, ok := strings.Cut(f, "="); ok && hash != "" && id != "" {
			out[id] = hash
		}
	}
	return out
}

// formatRan is the annotation value of parent with entries; "" for none.
func formatRan(parent types.UID, entries map[string]string) string {
	if len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(string(parent))
	for _, id := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString(" " + entries[id] + "=" + id)
	}
	return b.String()
}

// recorded returns parent's entries: its annotation, with this process's
// writes the annotation does not show yet.
func (r *runs) recorded(parent metav1.Object) map[string]string {
	return r.pending.over(parent.GetUID(), parseRan(parent))
}

// note remembers that parent's record gets changes.
func (r *runs) note(parent types.UID, changes map[string]string) { r.pending.note(parent, changes) }

// see remembers obj as the last state seen of a run-once child.
func (r *runs) see(parent types.UID, id string, obj object.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[types.UID]map[string]object.Object{}
	}
	if r.last[parent] == nil {
		r.last[parent] = map[string]object.Object{}
	}
	r.last[parent][id] = obj
}

// lastSeen returns the last state seen of parent's child id, or nil.
func (r *runs) lastSeen(parent types.UID, id string) object.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[parent][id]
}

// keepOnly forgets the last states of parent's children but those of ids.
func (r *runs) keepOnly(parent types.UID, ids map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.last[parent] {
		if !ids[id] {
			delete(r.last[parent], id)
		}
	}
	if len(r.last[parent]) == 0 {
		delete(r.last, parent)
	}
}

// forget drops what is remembered of parent, which is gone.
func (r *runs) forget(parent types.UID) {
	r.pending.forget(parent)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, parent)
}

// seeRunOnce returns the predicate of the source of child kind gk: it
// passes every change, and remembers the state of each run-once child of
// this controller's parents it shows, the last one before a deletion
// included, before the change queues the parent's reconcile.
func (d *Declarative[T]) seeRunOnce(gk schema.GroupKind) framework.Predicate[object.Object] {
	return func(e framework.Change[object.Object]) bool {
		obj := e.Object
		if obj == nil || obj.GetAnnotations()[RunOnceAnnotation] == "" || obj.GetLabels()[ManagerLabel] != labelValue(d.opts.FieldManager) {
			return true
		}
		if parent := obj.GetLabels()[ParentUIDLabel]; parent != "" {
			d.runs.see(types.UID(parent), objectID(gk, obj.GetNamespace(), obj.GetName()), obj)
		}
		return true
	}
}

// ranAlready reports whether c, a run-once child, ran: parent's record
// says it was ready with its content or, when the cache no longer shows it,
// the last state seen of it does (which is then recorded); and whether it
// is gone (the cache does not show it). ready is c's ReadyWhen, nil for its
// kind's built-in readiness. An error reading the cache answers that it is
// there: it is then applied, and fails there if the error lasts.
func (d *Declarative[T]) ranAlready(ctx context.Context, parent T, c child, ready func(object.Object) (bool, error)) (ran, gone bool) {
	_, err := c.read(ctx, c.obj.GetNamespace(), c.obj.GetName())
	gone = apierrors.IsNotFound(err)
	if d.runs.recorded(parent)[c.id()] == c.content {
		return true, gone
	}
	if !gone {
		return false, false // applied, and recorded once ready
	}
	last := d.runs.lastSeen(parent.GetUID(), c.id())
	if last == nil || last.GetAnnotations()[RunOnceAnnotation] != c.content {
		return false, true
	}
	ok := false
	if ready == nil {
		ok = readinessOf(c.kind.gvk.GroupKind(), last).ready
	} else {
		r, err, panicked := callReady(ready, last)
		ok = r && err == nil && panicked == nil
	}
	if ok {
		d.runs.note(parent.GetUID(), map[string]string{c.id(): c.content})
	}
	return ok, true
}

// recordRuns records in parent's RanAnnotation the run-once children ran
// found ready, and forgets the entries of children no longer declared run
// once (children holds the declared ones), writing the annotation only
// when that changes it.
func (d *Declarative[T]) recordRuns(ctx context.Context, parent T, children []child, ran []child) error {
	declared := map[string]bool{}
	for _, c := range children {
		if c.policy.runOnce {
			declared[c.id()] = true
		}
	}
	changes := map[string]string{}
	for _, c := range ran {
		changes[c.id()] = c.content
	}
	for id := range d.runs.recorded(parent) {
		if !declared[id] {
			changes[id] = ""
		}
	}
	d.runs.keepOnly(parent.GetUID(), declared)
	if len(changes) > 0 {
		d.runs.note(parent.GetUID(), changes)
	}
	want := formatRan(parent.GetUID(), d.runs.recorded(parent))
	if want == formatRan(parent.GetUID(), parseRan(parent)) {
		return nil
	}
	return d.writeRan(ctx, parent)
}

// ranManager owns RanAnnotation on parents.
func (d *Declarative[T]) ranManager() string { return d.opts.FieldManager + "-ran" }

// writeRan writes parent's RanAnnotation as this process knows it (see
// writeAnnotation).
func (d *Declarative[T]) writeRan(ctx context.Context, parent object.Object) error {
	return d.writeAnnotation(ctx, parent, "the runs", RanAnnotation, d.ranManager(), func(fresh metav1.Object) string {
		return formatRan(parent.GetUID(), d.runs.recorded(fresh))
	})
}
