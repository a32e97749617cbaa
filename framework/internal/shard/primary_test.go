package shard

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// stubInformer counts its stops.
type stubInformer struct {
	name  string
	stops int
}

func (s *stubInformer) String() string                                              { return s.name }
func (s *stubInformer) WaitForSync(context.Context) error                           { return nil }
func (s *stubInformer) RemoveListener(cache.ResourceEventHandlerRegistration) error { return nil }
func (s *stubInformer) Stop()                                                       { s.stops++ }

// An informer two controllers read (one's own kind, the other's owned
// kind) is stopped when the last of them lets go, not before; another
// informer of another description is counted apart.
func TestHoldsStopAnInformerWithItsLastHolder(t *testing.T) {
	var h Holds
	a, b := &stubInformer{name: "cms in bucket 3"}, &stubInformer{name: "secrets in bucket 3"}
	h.hold(a)
	h.hold(a)
	h.hold(b)
	if n := h.Len(); n != 2 {
		t.Fatalf("Len = %d after holding two informers, want 2", n)
	}
	h.letGo(a)
	if a.stops != 0 || h.Len() != 2 {
		t.Fatalf("after one of two holders let go: %d stops, Len %d; want 0, 2", a.stops, h.Len())
	}
	h.letGo(a)
	if a.stops != 1 || b.stops != 0 || h.Len() != 1 {
		t.Fatalf("after the last holder let go: stops %d and %d, Len %d; want 1, 0, 1", a.stops, b.stops, h.Len())
	}
}

// A bucket's listener records the highest resourceVersion it queued, and
// marks the bucket unordered once one is not a decimal integer.
func TestBucketReadSeesTheHighestResourceVersion(t *testing.T) {
	var rd bucketRead[*corev1.ConfigMap]
	for _, rv := range []string{"7", "12", "9"} {
		rd.see(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}})
	}
	if got := rd.delivered.Load(); got != 12 || rd.unordered.Load() {
		t.Fatalf("delivered %d, unordered %v; want 12, false", got, rd.unordered.Load())
	}
	rd.see(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "x1"}})
	if !rd.unordered.Load() || rd.delivered.Load() != 12 {
		t.Fatalf("after an opaque resourceVersion: delivered %d, unordered %v; want 12, true", rd.delivered.Load(), rd.unordered.Load())
	}
}
