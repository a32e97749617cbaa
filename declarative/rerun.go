package declarative

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/object"
)

// RerunAfterTTLReason is the reason of the Warning Event recorded on a
// parent that declares a Job setting spec.ttlSecondsAfterFinished without
// Child.RunOnce: once the TTL-after-finished controller deletes the
// finished Job, converge creates it again, as any declared child that is
// missing, and it runs again, each time, for as long as it is declared.
// The note names the Jobs and says to declare them RunOnce (or to drop the
// TTL). One Event per change of the Jobs named: not again while the
// parent's Ready condition already names them, so neither the reconciles
// the Job's runs bring about nor a restart repeats it; a parent whose status
// has no conditions gets one per process. The parent's Ready condition
// says it too, while it waits for such a Job or once every child is
// ready ("Deployment web waits for Job migrate (Complete; it runs again
// each time its ttlSecondsAfterFinished deletes it: declare it RunOnce to
// run it once) since ...").
const RerunAfterTTLReason = "RerunAfterTTL"

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// reruns reports whether c is a Job that runs again each time its
// ttlSecondsAfterFinished deletes it: it sets one, and is not run once.
func (c child) reruns() bool {
	if c.absent || c.policy.runOnce || c.kind.gvk.GroupKind() != jobKind {
		return false
	}
	_, set, _ := unstructured.NestedFieldNoCopy(c.obj.Object, "spec", "ttlSecondsAfterFinished")
	return set
}

// rerunWords say, in the Ready condition, what a Job that reruns does.
const rerunWords = "runs again each time its ttlSecondsAfterFinished deletes it: declare it RunOnce to run it once"

// reportReruns records a Warning Event of reason RerunAfterTTLReason on
// parent naming the children that rerun, unless it was reported already
// (see RerunAfterTTLReason); with none, it forgets the parent.
func (d *Declarative[T]) reportReruns(parent T, children []child) {
	var names []string
	for _, c := range children {
		if c.reruns() {
			names = append(names, displayName(parent, c))
		}
	}
	if len(names) == 0 {
		d.reruns.forget(parent.GetUID())
		return
	}
	said := true
	for _, n := range names {
		said = said && conditionSays(parent, n) && conditionSays(parent, rerunWords)
	}
	if !d.reruns.set(parent.GetUID(), strings.Join(names, ", ")) || said {
		return
	}
	note := strings.Join(names, ", ") + " set ttlSecondsAfterFinished and are not declared RunOnce: each time the TTL deletes one once it finished, converge creates it again and it runs again; declare them with RunOnce() to run them once per content, or drop the TTL"
	if len(names) == 1 {
		note = names[0] + " sets ttlSecondsAfterFinished and is not declared RunOnce: each time the TTL deletes it once it finished, converge creates it again and it runs again; declare it with RunOnce() to run it once per content, or drop the TTL"
	}
	d.recorder.Eventf(parent, nil, corev1.EventTypeWarning, RerunAfterTTLReason, "Apply", "%s", truncate(note, 1024))
}

// conditionSays reports whether parent's Ready condition holds text.
func conditionSays(parent object.Object, text string) bool {
	for _, c := range parentConditions(parent) {
		if c.Type == ReadyCondition && strings.Contains(c.Message, text) {
			return true
		}
	}
	return false
}
