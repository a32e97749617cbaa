package explore

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	bugsapi "github.com/converge-dev/converge/framework/explore/internal/bugs/api"
)

func TestDdminFindsTheSmallestFailingSubset(t *testing.T) {
	for _, tc := range []struct {
		idx, need, want []int
	}{
		{[]int{1, 2, 3, 4, 5, 6, 7, 8}, []int{3, 6}, []int{3, 6}},
		{[]int{1, 2, 3}, []int{2}, []int{2}},
		{[]int{1, 2}, []int{1, 2}, []int{1, 2}},
	} {
		runs := 0
		got := ddmin(tc.idx, func(sub []int) bool {
			runs++
			for _, n := range tc.need {
				if !slices.Contains(sub, n) {
					return false
				}
			}
			return true
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("ddmin(%v) needing %v: got %v after %d runs, want %v", tc.idx, tc.need, got, runs, tc.want)
		}
	}
}

func TestReplayCommandSelectsTheTest(t *testing.T) {
	e := explorer{test: "TestDB/scale.down"}
	got := e.replay(17, []int{2, 5})
	want := `go test -run '^TestDB$/^scale\.down$' ./framework/explore -converge.seed=17 -converge.faults=2,5`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAPlanIsDrawnFromItsSeed(t *testing.T) {
	kinds := []FaultKind{Conflict, ServerError, Crash, Lag}
	a, b := plan(7, kinds, 3, 10, 4), plan(7, kinds, 3, 10, 4)
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Fatalf("seed 7 drew %v, then %v", a, b)
	}
	for seed := range uint64(200) {
		for _, f := range plan(seed, kinds, 3, 10, 4) {
			if f.Kind != Lag && (f.Write < 1 || f.Write > 10) || f.Step < 0 || f.Step >= 4 {
				t.Fatalf("seed %d drew %v: out of range", seed, f)
			}
		}
	}
	if p := plan(7, kinds, -1, 10, 4); p != nil {
		t.Errorf("no faults allowed, drew %v", p)
	}
}

// A manager's scheme is a copy: it decodes the custom types of the
// source, and types added to it stay out of the source.
func TestCopySchemeKeepsTheSourceApart(t *testing.T) {
	src := bugsapi.NewScheme()
	dst, err := copyScheme(src)
	if err != nil {
		t.Fatal(err)
	}
	db := bugsapi.GroupVersion.WithKind("DB")
	if !dst.Recognizes(db) || !dst.Recognizes(corev1.SchemeGroupVersion.WithKind("Pod")) {
		t.Fatal("the copy lost a type")
	}
	extra := schema.GroupVersion{Group: "extra.converge.dev", Version: "v1"}
	dst.AddKnownTypes(extra, &bugsapi.DB{})
	if src.Recognizes(extra.WithKind("DB")) {
		t.Error("a type added to the copy reached the source")
	}
	if _, err := dst.New(db.GroupVersion().WithKind("DBList")); err != nil {
		t.Error(err)
	}
}
