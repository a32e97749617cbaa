package informers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestExpiredMarksAreSweptFromTheReadPath(t *testing.T) {
	c := &Cache{marks: map[writeKey]*writeMark{}, opts: Options{ReadYourWritesTimeout: time.Second}}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	old, fresh := writeKey{gk, "ns", "pruned"}, writeKey{gk, "ns", "read"}

	c.mark(old, &writeMark{rv: 5, at: time.Now().Add(-2 * markTTL)}) // never read back
	c.swept = time.Now().Add(-2 * markTTL)
	if _, ok := c.markFor(fresh); ok {
		t.Fatal("a mark for an object never written")
	}
	if c.hasMarks.Load() || len(c.marks) != 0 {
		t.Fatalf("expired mark kept: hasMarks=%v marks=%v", c.hasMarks.Load(), c.marks)
	}

	c.mark(fresh, &writeMark{rv: 7, at: time.Now()})
	c.swept = time.Now().Add(-2 * markTTL)
	if m, ok := c.markFor(fresh); !ok || m.rv != 7 {
		t.Fatalf("a recent mark was swept: %v %v", m, ok)
	}
	if !c.hasMarks.Load() {
		t.Fatal("hasMarks false with a mark pending")
	}
}
