package declarative

import (
	"strings"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Event is a Kubernetes Event that Desired asks converge to record on the
// parent (see State.Events): the way to report a decision or a problem
// without writing to the cluster from Desired. converge records it through
// the manager's EventRecorder (framework.Manager.EventRecorder) as an
// events.k8s.io/v1 Event regarding the parent, reported by
// Options.FieldManager (made a valid reportingController if it is not one).
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning. Zero means
	// Normal.
	Type string

	// Reason says why, in UpperCamelCase ("DeploymentExists"), at most 128
	// characters. Zero means Action.
	Reason string

	// Action says what was done or failed, in UpperCamelCase ("Apply"), at
	// most 128 characters. Zero means Reason.
	Action string

	// Note describes the event for humans, at most 1024 bytes (longer notes
	// are cut).
	Note string

	// Related is a second object the event is about, such as a child. Zero
	// means none.
	Related object.Object
}

// recordEvents records events on parent.
func (d *Declarative[T]) recordEvents(parent T, events []Event) {
	for _, e := range events {
		typ := e.Type
		if typ == "" {
			typ = corev1.EventTypeNormal
		}
		var related runtime.Object
		if !typednil.Is(e.Related) {
			related = e.Related
		}
		d.recorder.Eventf(parent, related, typ, e.Reason, e.Action, "%s", e.Note)
	}
}

// reportingController makes s a valid reportingController, which must be a
// qualified name (like a label key: "converge-foo", "example.com/foo").
func reportingController(s string) string {
	if len(validation.IsQualifiedName(s)) == 0 {
		return s
	}
	b := []byte(labelValue(s))
	for i, c := range b {
		if c == '_' {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-_.")
	if out == "" {
		return "converge"
	}
	return out
}
