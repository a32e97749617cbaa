package framework

import (
	"fmt"
	"maps"

	"github.com/converge-dev/converge/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ChangeType says what happened to a watched object.
type ChangeType int

const (
	// Added: the object was created, or listed when the watch started.
	Added ChangeType = iota
	// Updated: the object changed, or was replayed by a periodic resync.
	Updated
	// Deleted: the object is gone.
	Deleted
)

// String returns "added", "updated" or "deleted".
func (t ChangeType) String() string {
	switch t {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Deleted:
		return "deleted"
	}
	return "unknown"
}

// Change is one change to a watched object of type T, as predicates see it
// (a watch change, not a Kubernetes Event). Objects are shared with the
// cache: do not modify them.
type Change[T object.Object] struct {
	Type ChangeType
	// Object is the new state (Added, Updated) or the last state seen (Deleted).
	Object T
	// Old is the previous state for Updated changes, the zero T otherwise.
	Old T
	// Replay is true for changes that only replay what the cache already holds:
	// the initial list and periodic resyncs. Their keys are queued behind real
	// changes.
	Replay bool
}

// Predicate decides whether a change should enqueue a reconcile. Any function
// of this shape is a custom predicate; the ones in this package can be passed
// by name, e.g. WithPredicates(framework.GenerationChanged).
type Predicate[T object.Object] func(Change[T]) bool

// passes reports whether every predicate accepts e.
func passes[T object.Object](preds []Predicate[T], e Change[T]) bool {
	for _, p := range preds {
		if !p(e) {
			return false
		}
	}
	return true
}

// GenerationChanged accepts updates that change metadata.generation (a spec
// change, for types with a status subresource) and every other change.
func GenerationChanged[T object.Object](e Change[T]) bool {
	return e.Type != Updated || e.Old.GetGeneration() != e.Object.GetGeneration()
}

// LabelsChanged accepts updates that change labels and every other change.
func LabelsChanged[T object.Object](e Change[T]) bool {
	return e.Type != Updated || !maps.Equal(e.Old.GetLabels(), e.Object.GetLabels())
}

// AnnotationsChanged accepts updates that change annotations and every other change.
func AnnotationsChanged[T object.Object](e Change[T]) bool {
	return e.Type != Updated || !maps.Equal(e.Old.GetAnnotations(), e.Object.GetAnnotations())
}

// ResourceVersionChanged accepts updates that change the resource version,
// which drops the replays of a periodic resync, and every other change.
func ResourceVersionChanged[T object.Object](e Change[T]) bool {
	return e.Type != Updated || e.Old.GetResourceVersion() != e.Object.GetResourceVersion()
}

// And accepts a change when every predicate does (and when there are none).
func And[T object.Object](preds ...Predicate[T]) Predicate[T] {
	return func(e Change[T]) bool { return passes(preds, e) }
}

// Or accepts a change when at least one predicate does.
func Or[T object.Object](preds ...Predicate[T]) Predicate[T] {
	return func(e Change[T]) bool {
		for _, p := range preds {
			if p(e) {
				return true
			}
		}
		return false
	}
}

// Not accepts a change when p does not.
func Not[T object.Object](p Predicate[T]) Predicate[T] {
	return func(e Change[T]) bool { return !p(e) }
}

// LabelsMatch accepts changes to objects whose labels sel selects. An
// update passes when the object matches before or after it, so an object
// that leaves the selection still reconciles once (to undo what its labels
// asked for). To stop the cache from holding unselected objects at all,
// select them in the informer instead (informers.Selection.Labels).
func LabelsMatch[T object.Object](sel labels.Selector) Predicate[T] {
	return func(e Change[T]) bool {
		if sel.Matches(labels.Set(e.Object.GetLabels())) {
			return true
		}
		return e.Type == Updated && sel.Matches(labels.Set(e.Old.GetLabels()))
	}
}

// LabelSelectorMatch is LabelsMatch for a metav1.LabelSelector, as
// Kubernetes objects spell selectors; it fails when the selector is invalid.
func LabelSelectorMatch[T object.Object](ls metav1.LabelSelector) (Predicate[T], error) {
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("framework: label selector %s: %w", metav1.FormatLabelSelector(&ls), err)
	}
	return LabelsMatch[T](sel), nil
}
