package served

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A signal reaches the subscribers of its kind only, never blocks (one
// signal waits at most), and no longer reaches a subscriber that left.
func TestSignalsReachTheSubscribersOfTheirKind(t *testing.T) {
	var s Signals
	crd := schema.GroupKind{Group: "example.com", Kind: "Lamp"}
	lamps, leave := s.Subscribe(crd)
	others, _ := s.Subscribe(schema.GroupKind{Kind: "ConfigMap"})
	s.Signal(crd)
	s.Signal(crd) // the first still waits: this one must not block
	if len(lamps) != 1 || len(others) != 0 {
		t.Fatalf("pending signals: %d for the kind signalled, %d for another; want 1 and 0", len(lamps), len(others))
	}
	<-lamps
	leave()
	s.Signal(crd)
	if len(lamps) != 0 {
		t.Error("a subscriber that left was signalled")
	}
}
