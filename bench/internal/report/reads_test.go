package report

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestMeasureReads(t *testing.T) {
	gets := map[string]int{}
	SetReads(Reads{
		Key: func(i int) (string, string) { return "ns", string(rune('a' + i)) },
		Get: func(_ context.Context, ns, name string) error {
			gets[ns+"/"+name]++
			return nil
		},
		List: func(context.Context, string) (int, error) { return 3, nil },
	})
	t.Cleanup(func() { readsOf.Store(nil) })
	line := measureReads(3)
	for _, f := range []string{"Q getP50=", " getP99=", " reconcileP50=", " reconcileP99=", " listMs=", " listed=3 ", " err=-"} {
		if !strings.Contains(line, f) {
			t.Errorf("reply %q lacks %q", line, f)
		}
	}
	total := 0
	for k, n := range gets {
		if k != "ns/a" && k != "ns/b" && k != "ns/c" {
			t.Errorf("a Get of %s, not one of the 3 objects", k)
		}
		total += n
	}
	if want := readGets + 4*readReconciles; total != want {
		t.Errorf("%d Gets, want %d (the Gets and four per reconcile)", total, want)
	}

	SetReads(Reads{
		Key:  func(int) (string, string) { return "ns", "x" },
		Get:  func(context.Context, string, string) error { return errors.New("not found") },
		List: func(context.Context, string) (int, error) { return 0, nil },
	})
	if line := measureReads(1); !strings.HasSuffix(line, `err="get ns/x: not found"`) {
		t.Errorf("a failing Get answers %q, want its error last", line)
	}
}
