package declarative

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// appliedStatus is the status converge last applied to one parent.
type appliedStatus struct {
	hash string // of the status applied
	// resourceVersion is the parent's resourceVersion in the answer to
	// that apply.
	resourceVersion string
}

// statusMemory remembers, per parent, the last status this process applied,
// so that a status equal to what the parent already holds is not applied
// again. It is what tells a field the server holds as zero from a field it
// does not hold at all: a typed parent from the cache shows both as zero.
//
// It is safe for concurrent use; a parent is reconciled by one worker at a
// time anyway.
type statusMemory struct {
	mu sync.Mutex
	// byUID holds the last status applied to each parent that exists; mu
	// guards it. ReconcileDeleted removes the parents that are gone.
	byUID map[types.UID]appliedStatus
}

func (m *statusMemory) get(uid types.UID) (appliedStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.byUID[uid]
	return a, ok
}

func (m *statusMemory) set(uid types.UID, a appliedStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byUID == nil {
		m.byUID = map[types.UID]appliedStatus{}
	}
	m.byUID[uid] = a
}

func (m *statusMemory) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byUID, uid)
}

func (m *statusMemory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byUID)
}

// statusHeld reports whether parent already holds status want (nulls dropped, as
// it would be applied), whose hash is h. Two cases are certain:
//
//   - this process applied exactly want to this parent, and the parent is
//     still at the resourceVersion that apply answered with: nobody wrote it
//     since;
//   - the parent's status, read from the cache, equals want, and equality is
//     not an accident of typed decoding: the parent is unstructured (absent
//     fields are absent), or want holds no zero value (0, "", false, {} or
//     []), which a typed object shows whether or not the server holds it.
//
// In any other case the status is applied: when the server already holds
// it, the apply changes nothing and costs one request (once per parent
// after a restart, and once after someone else writes the parent), never a
// loop.
func (d *Declarative[T]) statusHeld(parent T, want any, h string) bool {
	if last, ok := d.statuses.get(parent.GetUID()); ok && last.hash == h && last.resourceVersion == parent.GetResourceVersion() {
		return true
	}
	live, err := toMap(parent)
	if err != nil {
		return false
	}
	cur := live["status"]
	if m, ok := cur.(map[string]any); ok {
		m = runtime.DeepCopyJSON(m)
		dropNulls(m)
		cur = m
	}
	if cur == nil || !contains(cur, want) || !contains(want, cur) {
		return false
	}
	_, exact := any(parent).(*unstructured.Unstructured)
	return exact || !hasZero(want)
}

// hasZero reports whether v, a JSON value, holds a zero value anywhere: a
// value a typed Go field without omitempty shows even when the object on the
// server does not hold it.
func hasZero(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return true
		}
		for _, e := range x {
			if hasZero(e) {
				return true
			}
		}
		return false
	case []any:
		if len(x) == 0 {
			return true
		}
		for _, e := range x {
			if hasZero(e) {
				return true
			}
		}
		return false
	case string:
		return x == ""
	case bool:
		return !x
	case nil:
		return true
	}
	f, ok := number(v)
	return ok && f == 0
}

// ReconcileDeleted forgets what converge knows of a parent that is gone. It
// makes Declarative a reconcile.DeletionReconciler; it never fails.
func (d *Declarative[T]) ReconcileDeleted(_ context.Context, gone reconcile.Tombstone[T]) (reconcile.Result, error) {
	if !typednil.Is(gone.Last) {
		d.statuses.forget(gone.Last.GetUID())
		d.ledger.forget(gone.Last.GetUID())
		d.appliedChildren.forget(gone.Last.GetUID())
		d.runs.forget(gone.Last.GetUID())
		d.invalids.forget(gone.Last.GetUID())
		d.reruns.forget(gone.Last.GetUID())
	}
	d.conflicts.set(gone.Request, nil)
	d.kindWaits.forget(gone.Request)
	d.clusterWaits.forget(gone.Request)
	return reconcile.Result{}, nil
}

var _ reconcile.DeletionReconciler[object.Object] = (*Declarative[object.Object])(nil)

// keepChildren finishes a reconcile whose State leaves the children as they
// are: only the status is applied.
func (d *Declarative[T]) keepChildren(ctx context.Context, parent T, state State) (reconcile.Result, error) {
	if len(state.Children) > 0 {
		return d.invalid(ctx, parent, state, fmt.Errorf("Desired returned State.KeepChildren with %d Children: keep the children as they are, or declare them, not both", len(state.Children)))
	}
	if state.Status != nil {
		if err := d.applyStatus(ctx, parent, state.Status); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: state.RequeueAfter}, nil
}
