package declarative

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
)

// ledger records which children converge created, or adopted, that no
// owner reference can tie to their parent (see labelLinked): their UIDs,
// as the API server returned them, in the parent's ChildrenAnnotation. A
// UID is assigned by the server to one object and never reused, so an
// object whose UID the ledger lists is provably the parent's child; labels
// only find the candidates.
//
// The annotation is written with a field manager of its own (see
// ledgerManager) after each create and after pruning. Until the cache's copy
// of the parent shows a write, ledger remembers it: added holds the UIDs
// this process recorded that the annotation may not show yet, removed those
// it dropped that the annotation may still show.
//
// It is safe for concurrent use.
type ledger struct {
	mu sync.Mutex
	// added and removed map a parent's UID to child UIDs; mu guards them.
	added, removed map[types.UID]map[types.UID]bool
}

// recorded returns the child UIDs parent's ledger holds: its annotation,
// with this process's writes the annotation does not show yet. Writes the
// annotation shows are forgotten.
func (l *ledger) recorded(parent metav1.Object) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, uid := range strings.Fields(parent.GetAnnotations()[ChildrenAnnotation]) {
		out[types.UID(uid)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := parent.GetUID()
	for uid := range l.added[p] {
		if out[uid] {
			delete(l.added[p], uid) // the annotation shows it
		}
		out[uid] = true
	}
	for uid := range l.removed[p] {
		if !out[uid] && !l.added[p][uid] {
			delete(l.removed[p], uid) // the annotation no longer shows it
		}
		delete(out, uid)
	}
	return out
}

// holds reports whether parent's ledger records child.
func (l *ledger) holds(parent metav1.Object, child types.UID) bool {
	return child != "" && l.recorded(parent)[child]
}

// note records that parent's ledger gains add and loses remove, in memory.
func (l *ledger) note(parent types.UID, add, remove []types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.added == nil {
		l.added, l.removed = map[types.UID]map[types.UID]bool{}, map[types.UID]map[types.UID]bool{}
	}
	for _, uid := range add {
		set(l.added, parent, uid)
		delete(l.removed[parent], uid)
	}
	for _, uid := range remove {
		set(l.removed, parent, uid)
		delete(l.added[parent], uid)
	}
}

func set(m map[types.UID]map[types.UID]bool, parent, uid types.UID) {
	if m[parent] == nil {
		m[parent] = map[types.UID]bool{}
	}
	m[parent][uid] = true
}

// forget drops what is remembered of parent, which is gone.
func (l *ledger) forget(parent types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.added, parent)
	delete(l.removed, parent)
}

// ledgerManager owns ChildrenAnnotation on parents, apart from the fields
// the reconciler applies.
func (d *Declarative[T]) ledgerManager() string { return d.opts.FieldManager + "-ledger" }

// record adds add to parent's ledger and drops remove from it, then writes
// the ledger to parent's ChildrenAnnotation. The apply names the parent's
// UID, so that it never writes to (or creates) another parent of the same
// name: a parent gone is not an error.
func (d *Declarative[T]) record(ctx context.Context, parent object.Object, add, remove []types.UID) error {
	d.ledger.note(parent.GetUID(), add, remove)
	uids := make([]string, 0, len(add))
	for uid := range d.ledger.recorded(parent) {
		uids = append(uids, string(uid))
	}
	slices.Sort(uids)
	u := d.objectRef(parent)
	u.SetUID(parent.GetUID())
	if len(uids) > 0 {
		u.SetAnnotations(map[string]string{ChildrenAnnotation: strings.Join(uids, " ")})
	}
	_, err := d.client.Apply(ctx, u, client.FieldManager(d.ledgerManager()), client.ForceOwnership())
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the parent is gone
	}
	if err != nil {
		return fmt.Errorf("record the children of %s %s in annotation %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), ChildrenAnnotation, err)
	}
	return nil
}
