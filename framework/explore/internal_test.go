package explore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
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

func TestReplayCommandCarriesTheFaults(t *testing.T) {
	e := &explorer{test: "TestDB/scale.down"}
	got := e.replay([]Fault{{Kind: ServerError, Write: 4}, {Kind: Crash, Write: 2}, {Kind: Lag, Step: 2}, {Kind: Conflict, Write: 7}})
	want := `go test -run '^TestDB$/^scale\.down$' ./framework/explore -converge.faults=500@w4,crash@w2,lag@s2,409@w7`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := e.replay(nil), `go test -run '^TestDB$/^scale\.down$' ./framework/explore -converge.schedules=1`; got != want {
		t.Errorf("fault-free replay: got  %s\nwant %s", got, want)
	}
	// From Check, which knows no test: the flags alone.
	if got, want := (&explorer{}).replay([]Fault{{Kind: Crash, Write: 2}}), "-converge.faults=crash@w2"; got != want {
		t.Errorf("Check's replay: got %q, want %q", got, want)
	}
}

// A failure replayed from -converge.seed says one schedule ran, not "of"
// the budget; its plan lists each fault apart.
func TestReplayedFailureSaysSo(t *testing.T) {
	f := &Failure{Seed: 9, Schedule: 3, Schedules: 200, Broken: "x", Err: fmt.Errorf("boom"),
		Plan: []Fault{{Kind: Crash, Write: 2}, {Kind: Conflict, Write: 5}}, Shrunk: []int{1, 2}, replayed: true}
	got := f.Error()
	for _, want := range []string{"the replayed schedule 3 (seed 9)", "#1 the manager crashes after write 2 and starts again; #2 409 Conflict on write 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "of 200") {
		t.Errorf("report %q counts the budget for a replay", got)
	}
}

func TestFaultTokensRoundTrip(t *testing.T) {
	p := []Fault{{Kind: ServerError, Write: 4}, {Kind: Crash, Write: 2}, {Kind: Lag, Step: 2}, {Kind: Conflict, Write: 7}}
	got, err := parseFaults(tokens(p), 3)
	if err != nil || !slices.Equal(got, p) {
		t.Fatalf("parseFaults(%q) = %v, %v", tokens(p), got, err)
	}
	for _, bad := range []string{"2", "500@w0", "500@s1", "lag@w1", "lag@s3", "boom@w1", "crash@w2,500@w2", "lag@s1,lag@s1"} {
		if _, err := parseFaults(bad, 3); err == nil {
			t.Errorf("parseFaults(%q) took it", bad)
		} else {
			t.Logf("%s: %v", bad, err)
		}
	}
}

// A plan is drawn from its seed alone, its write triggers in a fixed
// range, and no two of its faults share a trigger.
func TestAPlanIsDrawnFromItsSeedAlone(t *testing.T) {
	kinds := []FaultKind{Conflict, ServerError, Crash, Lag}
	a, b := plan(7, kinds, 3, 4, minWrites), plan(7, kinds, 3, 4, minWrites)
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Fatalf("seed 7 drew %v, then %v", a, b)
	}
	beyond := false
	for seed := range uint64(2000) {
		p := plan(seed, kinds, 3, 4, 30)
		for i, f := range p {
			beyond = beyond || f.Write > minWrites
			if f.Kind != Lag && (f.Write < 1 || f.Write > 30) || f.Step < 0 || f.Step >= 4 {
				t.Fatalf("seed %d drew %v: out of range", seed, f)
			}
			for _, g := range p[:i] {
				if f.collides(g) {
					t.Fatalf("seed %d drew %v and %v: the same trigger", seed, g, f)
				}
			}
		}
	}
	if !beyond {
		t.Errorf("with 30 writes in the reference, no trigger beyond write %d", minWrites)
	}
	if p := plan(7, kinds, -1, 4, minWrites); p != nil {
		t.Errorf("no faults allowed, drew %v", p)
	}
}

// The delete-count oracle counts the deletes that removed something: a
// delete answered 404 found nothing.
func TestTheDeleteOracleCountsOnlyDeletesThatRemoved(t *testing.T) {
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	del := func(code int) Write {
		return Write{Manager: "manager-1", Verb: "delete", Kind: cm, Namespace: "ns", Name: "a", Code: code, attempt: 1}
	}
	if b := moreDeletes([]Write{del(404), del(404)}, deletes([]Write{del(200)})); b != nil {
		t.Errorf("two deletes answered 404 against one that removed: %v", b.err)
	}
	if b := moreDeletes([]Write{del(200), del(200)}, deletes([]Write{del(200)})); b == nil {
		t.Error("two deletes that removed, one in the reference: not caught")
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
		Converged: []Invariant{{Name: "both Secrets", Check: func(ctx context.Context, s *Snapshot) error {
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
	first, err := (&explorer{test: "TestX"}).check(t.Context(), opts)
	if err != nil || first == nil {
		t.Fatalf("not caught: %v", err)
	}
	shrunk := subset(first.Plan, first.Shrunk)
	if !strings.HasSuffix(first.Command, " -converge.faults="+tokens(shrunk)) {
		t.Errorf("replay command %q", first.Command)
	}
	again, err := (&explorer{test: "TestX", replayFaults: shrunk}).check(t.Context(), opts)
	if err != nil || again == nil {
		t.Fatalf("the replay passed: %v\nfirst:\n%s", err, first)
	}
	if again.Broken != first.Broken || fmt.Sprint(subset(again.Plan, again.Shrunk)) != fmt.Sprint(shrunk) ||
		fmt.Sprint(again.Hit) != fmt.Sprint(map[int]string{1: first.Hit[first.Shrunk[0]]}) && len(shrunk) == 1 {
		t.Fatalf("the replay differs:\n%s\n%s", first, again)
	}
	if !strings.Contains(again.Error(), "the replayed faults "+tokens(shrunk)) {
		t.Errorf("the replay's report:\n%s", again)
	}
}

// A write a fault answered is retried unnumbered, so a fault shifts no
// later write's number: crash@w2 hits the same write with or without a
// 409 on write 1 before it (which the controller retries), and in two
// runs of each plan.
func TestARetriedWriteKeepsTheNumbering(t *testing.T) {
	pair := func(mgr *framework.Manager) error {
		c := mgr.Client()
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "pair", framework.ControllerOptions{}).
			Owns(&corev1.Secret{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				for _, suffix := range []string{"-a", "-b"} {
					s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + suffix,
						OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}}}
					if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
						return reconcile.Result{}, err
					}
				}
				return reconcile.Result{}, nil
			}))
	}
	opts := Options{Setup: pair, Steps: []Step{Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})}}.withDefaults()
	hit := func(faults []Fault) string {
		o, err := runSchedule(t.Context(), opts, faults)
		if err != nil {
			t.Fatal(err)
		}
		if !o.fired[len(faults)-1] {
			t.Fatalf("%s: the crash did not fire; writes: %v", tokens(faults), o.writes)
		}
		return hitOf(faults[len(faults)-1], true, o)
	}
	crash := Fault{Kind: Crash, Write: 2}
	var got []string
	for _, faults := range [][]Fault{{crash}, {{Kind: Conflict, Write: 1}, crash}, {crash}, {{Kind: Conflict, Write: 1}, crash}} {
		got = append(got, tokens(faults)+": "+hit(faults))
	}
	for _, g := range got {
		if !strings.HasSuffix(g, ": manager-1: create v1 Secret ns/p-b → 201") {
			t.Errorf("crash@w2 hit another write: %s", strings.Join(got, "; "))
			break
		}
	}
	t.Log(strings.Join(got, "; "))
}

// A replay token of a fault the test's plane cannot inject is refused with
// an error naming the fault and the plane, before anything runs.
func TestReplayOfAnotherPlanesFaultIsRefused(t *testing.T) {
	steps := []Step{Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})}
	for _, c := range []struct {
		token string
		opts  Options
		want  string
	}{
		{"restart@w1", Options{Steps: steps}, "restart@w1: framework/fake (this test sets no Options.Envtest) cannot inject Restart faults"},
		{"hold@w2", Options{Steps: steps}, "hold@w2: framework/fake (this test sets no Options.Envtest) cannot inject Hold faults"},
		{"expire@s0", Options{Steps: steps}, "expire@s0: framework/fake (this test sets no Options.Envtest) cannot inject Expire faults"},
		{"lag@s0", Options{Steps: steps, Envtest: &envtest.Environment{}}, "lag@s0: a test control plane (Options.Envtest) cannot inject Lag faults"},
	} {
		old := *faultsFlag
		*faultsFlag = c.token
		_, _, err := fromFlags(t.Name(), c.opts)
		*faultsFlag = old
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-converge.faults=%s: error %v, want one containing %q", c.token, err, c.want)
		}
	}
	*faultsFlag = "409@w1,crash@w2"
	defer func() { *faultsFlag = "" }()
	if _, _, err := fromFlags(t.Name(), Options{Steps: steps}); err != nil {
		t.Errorf("faults the fake injects: %v", err)
	}
}

// On a test control plane, an informer that is not watching is reported
// with the managers' last list or watch request of its kind and how it
// ended; a Get (of one object) and a write are not such requests.
func TestTheLastListOrWatchRequestIsNoted(t *testing.T) {
	p := &realPlane{}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if got := p.lastRead(cm); got != "" {
		t.Errorf("before any request: got %q", got)
	}
	get := func(url string) *http.Request { return httptest.NewRequest(http.MethodGet, url, nil) }
	p.noteRead(request{kind: cm}, get("/api/v1/configmaps?watch=true"), nil, errors.New("read: connection reset by peer"))
	p.noteRead(request{kind: cm, name: "a"}, get("/api/v1/namespaces/ns/configmaps/a"), &http.Response{StatusCode: 404}, nil)
	if got := p.lastRead(cm); !strings.HasPrefix(got, "its last watch request was sent ") || !strings.HasSuffix(got, " ago: read: connection reset by peer") {
		t.Errorf("after a failed watch and a Get: got %q", got)
	}
	p.noteRead(request{kind: cm}, get("/api/v1/configmaps?watch=true"), &http.Response{StatusCode: 200}, nil)
	if got := p.lastRead(cm); !strings.HasSuffix(got, " ago: 200, the stream open") {
		t.Errorf("after an open watch: got %q", got)
	}
	p.noteRead(request{kind: cm}, get("/api/v1/configmaps?limit=500"), &http.Response{StatusCode: 503}, nil)
	if got := p.lastRead(cm); !strings.HasPrefix(got, "its last list request") || !strings.HasSuffix(got, " ago: 503") {
		t.Errorf("after a failed list: got %q", got)
	}
}
