package explore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	bugsapi "github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
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

// The replay flags' path: -converge.seed and -converge.faults run that
// schedule with those faults only, and it breaks the same property with
// the same faults hitting the same writes.
func TestReplayRunsTheShrunkFaults(t *testing.T) {
	opts := Options{
		Setup: func(mgr *framework.Manager) error {
			c := mgr.Client()
			return framework.NewBuilder[*corev1.ConfigMap](mgr, "pair", framework.ControllerOptions{}).
				Owns(&corev1.Secret{}).
				Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
					err := c.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name + "-a"}, &corev1.Secret{})
					if err == nil || !apierrors.IsNotFound(err) {
						return reconcile.Result{}, err // one check for both
					}
					for _, suffix := range []string{"-a", "-b"} {
						s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + suffix,
							OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}}}
						if err := c.Create(ctx, s); err != nil {
							return reconcile.Result{}, err
						}
					}
					return reconcile.Result{}, nil
				}))
		},
		Steps: []Step{Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})},
		Converged: []Invariant{{Name: "both Secrets", Check: func(ctx context.Context, s *State) error {
			if s.Steps() == 0 {
				return nil
			}
			if _, ok, err := Get[*corev1.Secret](ctx, s, types.NamespacedName{Namespace: "ns", Name: "p-b"}); err != nil || !ok {
				return fmt.Errorf("no p-b (%v)", err)
			}
			return nil
		}}},
		Seed: 9,
	}
	first, err := explorer{test: "TestX"}.check(t.Context(), opts)
	if err != nil || first == nil {
		t.Fatalf("not caught: %v", err)
	}
	again, err := explorer{test: "TestX", replaySeed: first.Seed, replayFaults: first.Shrunk}.check(t.Context(), opts)
	if err != nil || again == nil {
		t.Fatalf("the replay passed: %v\nfirst:\n%s", err, first)
	}
	if again.Seed != first.Seed || again.Schedule != first.Schedule || again.Broken != first.Broken ||
		!slices.Equal(again.Shrunk, first.Shrunk) || fmt.Sprint(again.Hit) != fmt.Sprint(first.Hit) {
		t.Fatalf("the replay differs:\n%s\n%s", first, again)
	}
	if !strings.Contains(first.Replay, fmt.Sprintf("-converge.seed=%d -converge.faults=%s", first.Seed, joinInts(first.Shrunk))) {
		t.Errorf("replay command %q", first.Replay)
	}
}
