package declarative

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// beingDeleted says, for messages, that obj is being deleted and what holds
// it: "it is being deleted (Terminating, finalizer example.com/hold)".
func beingDeleted(obj metav1.Object) string {
	return "it is being deleted (" + terminating(obj) + ")"
}

// terminating says how obj is being deleted: "Terminating", and the
// finalizers that hold it, which are someone else's (converge puts none
// on children).
func terminating(obj metav1.Object) string {
	switch fins := obj.GetFinalizers(); len(fins) {
	case 0:
		return "Terminating"
	case 1:
		return "Terminating, finalizer " + fins[0]
	default:
		return "Terminating, finalizers " + strings.Join(fins, ", ")
	}
}

// deletionWait says what the deletion of parent waits for, among its
// children found on the API server (by kind, in kinds' order) and the
// objectIDs held, which children still there are After: the first child
// holding another that is not held itself ("deletion waits for Deployment
// web (Terminating, finalizer example.com/hold)"), else the first holding
// one. deleted holds the children this reconcile deleted; cluster is the
// cluster of found, "" for the parent's.
func deletionWait(parent object.Object, cluster string, kinds []*childKind, found [][]object.Object, held, deleted map[string]bool) string {
	var first, leaf string
	for i, ck := range kinds {
		for _, obj := range found[i] {
			holds := false
			for id := range dependedOn([]object.Object{obj}) {
				holds = holds || held[id]
			}
			if !holds {
				continue
			}
			id := objectIn(ck.gvk.GroupKind(), cluster, obj.GetNamespace(), obj.GetName())
			state := "being deleted"
			if obj.GetDeletionTimestamp() != nil {
				state = terminating(obj)
			} else if !deleted[id] {
				state = "waiting for the children After it"
			}
			msg := fmt.Sprintf("deletion waits for %s (%s)", displayID(parent, id), state)
			if first == "" {
				first = msg
			}
			if leaf == "" && !held[id] {
				leaf = msg
			}
		}
	}
	if leaf != "" {
		return leaf
	}
	return first
}

// noteDeletionWait notes, as the reconcile's reconcile.Blocker, that the
// deletion of parent waits (msg says for what), and says so in its Ready
// condition (see setReadyCondition).
func (d *Declarative[T]) noteDeletionWait(ctx context.Context, parent T, msg string) error {
	cond, blocker := readyCondition(parent, readyState{status: metav1.ConditionFalse, reason: WaitingReason, message: msg, since: true})
	framework.NoteBlocked(ctx, blocker)
	return d.setReadyCondition(ctx, parent, cond)
}
