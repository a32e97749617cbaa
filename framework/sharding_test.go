package framework_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/reconcile"
)

// referee counts reconciles of one key that run in two members at once.
type referee struct {
	mu       sync.Mutex
	active   map[string]string // key -> member reconciling it now
	overlaps []string
	last     map[string]string // key -> member that reconciled it last
}

func newReferee() *referee {
	return &referee{active: map[string]string{}, last: map[string]string{}}
}

func (r *referee) enter(member, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.active[key]; ok && other != member {
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s in %s and %s", key, other, member))
	}
	r.active[key] = member
	r.last[key] = member
}

func (r *referee) exit(member, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[key] == member {
		delete(r.active, key)
	}
}

func (r *referee) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.overlaps)
}

// seenAnnotation is what the members write: the data version they saw.
const seenAnnotation = "test.converge.dev/seen"

// member is one manager of a ring (or, with no ring, an unsharded replica)
// reconciling the ConfigMaps of ns: it reports to ref, waits a little so
// that overlaps would show, and writes the data version it saw.
type member struct {
	id  string
	mgr *framework.Manager
	run *testenv.Run
}

func startMember(t *testing.T, ns, ring, id string, ref *referee) *member {
	t.Helper()
	opts := framework.Options{Cache: informers.Options{Namespace: ns}, GracefulShutdownTimeout: 10 * time.Second}
	if ring != "" {
		opts.Sharding = framework.ShardingOptions{
			Ring: ring, Namespace: ns, Identity: id,
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		}
	}
	mgr := testenv.NewManager(t, plane.Config(t), opts)
	m := &member{id: id, mgr: mgr}
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "sharded", framework.ControllerOptions{Workers: 4, Sharded: ring != ""}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			key := cm.Namespace + "/" + cm.Name
			ref.enter(id, key)
			defer ref.exit(id, key)
			time.Sleep(30 * time.Millisecond)
			if cm.Annotations[seenAnnotation] == cm.Data["v"] {
				return reconcile.Result{}, nil
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, seenAnnotation, cm.Data["v"])
			return reconcile.Result{}, mgr.Client().Patch(ctx, cm.DeepCopy(), types.MergePatchType, []byte(patch))
		}))
	if err != nil {
		t.Fatal(err)
	}
	m.run = testenv.StartManager(t, mgr)
	return m
}

func (m *member) serving() []int {
	st, _ := m.mgr.RingStatus()
	return st.Serving
}

// cached returns the names of the ConfigMaps m's cache holds, nil when
// the cache cannot say now.
func (m *member) cached(t *testing.T, ns string) []string {
	var list corev1.ConfigMapList
	if err := m.mgr.Cache().List(t.Context(), &list, informers.InNamespace(ns)); err != nil {
		t.Log(err)
		return nil
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names
}

// setVersion sets data v of every ConfigMap to v.
func setVersion(t *testing.T, cs kubernetes.Interface, ns string, cms []*corev1.ConfigMap, v int) {
	t.Helper()
	for _, cm := range cms {
		patch := fmt.Sprintf(`{"data":{"v":%q}}`, strconv.Itoa(v))
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(t.Context(), cm.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// converged reports whether every ConfigMap's seen annotation is v.
func converged(t *testing.T, cs kubernetes.Interface, ns string, v int) bool {
	list, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, cm := range list.Items {
		if cm.Annotations[seenAnnotation] != strconv.Itoa(v) {
			return false
		}
	}
	return true
}

// ownedBy returns the names of the ConfigMaps whose buckets are in held.
func ownedBy(cms []*corev1.ConfigMap, held []int) []string {
	b := informers.Buckets{Field: informers.ShardByUID, Count: 32}
	var names []string
	for _, cm := range cms {
		if slices.Contains(held, b.OfObject(cm)) {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	return names
}

func TestShardingSplitsTheObjectsAndHandsThemOver(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	ns := testenv.Namespace(t, cs)
	var cms []*corev1.ConfigMap
	for i := range 80 {
		cms = append(cms, testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%03d", i), nil))
	}
	ref := newReferee()

	a := startMember(t, ns, "ring", "a", ref)
	testenv.Eventually(t, "member a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })
	setVersion(t, cs, ns, cms, 1)
	testenv.Eventually(t, "every ConfigMap reconciled at v=1", func() bool { return converged(t, cs, ns, 1) })

	b := startMember(t, ns, "ring", "b", ref)
	testenv.Eventually(t, "a and b serve 16 buckets each", func() bool {
		sa, sb := a.serving(), b.serving()
		return len(sa) == 16 && len(sb) == 16 && !slices.ContainsFunc(sa, func(x int) bool { return slices.Contains(sb, x) })
	})
	// Each member caches exactly the objects of its buckets (a bucket just
	// handed over leaves the cache a moment after it stops being served).
	for _, m := range []*member{a, b} {
		testenv.Eventually(t, "member "+m.id+" caches exactly the ConfigMaps of its buckets", func() bool {
			return slices.Equal(m.cached(t, ns), ownedBy(cms, m.serving()))
		})
	}
	setVersion(t, cs, ns, cms, 2)
	testenv.Eventually(t, "every ConfigMap reconciled at v=2 by two members", func() bool { return converged(t, cs, ns, 2) })

	// a leaves gracefully while the objects change: b takes everything over.
	setVersion(t, cs, ns, cms, 3)
	a.run.Cancel()
	<-a.run.Done
	if a.run.Err != nil {
		t.Fatalf("member a stopped with %v", a.run.Err)
	}
	testenv.Eventually(t, "b serves all 32 buckets after a left", func() bool { return len(b.serving()) == 32 })
	testenv.Eventually(t, "every ConfigMap reconciled at v=3", func() bool { return converged(t, cs, ns, 3) })

	if o := ref.seen(); len(o) > 0 {
		t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
	}
}

// TestShardingRefereeSeesOverlaps is the negative control of the test
// above: two replicas that do not shard reconcile the same keys at once,
// and the referee counts it.
func TestShardingRefereeSeesOverlaps(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	ns := testenv.Namespace(t, cs)
	var cms []*corev1.ConfigMap
	for i := range 20 {
		cms = append(cms, testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%03d", i), nil))
	}
	ref := newReferee()
	startMember(t, ns, "", "a", ref)
	startMember(t, ns, "", "b", ref)
	setVersion(t, cs, ns, cms, 1)
	testenv.Eventually(t, "every ConfigMap reconciled at v=1", func() bool { return converged(t, cs, ns, 1) })
	for v := 2; len(ref.seen()) == 0 && v < 20; v++ {
		setVersion(t, cs, ns, cms, v)
		testenv.Eventually(t, "every ConfigMap reconciled at v="+strconv.Itoa(v), func() bool { return converged(t, cs, ns, v) })
	}
	if len(ref.seen()) == 0 {
		t.Fatal("two unsharded replicas reconciled the same ConfigMaps, and the referee saw no overlap: it cannot see one")
	}
}

func TestShardingRefusesAnIncompatibleMember(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	ns := testenv.Namespace(t, cs)
	a := startMember(t, ns, "ring", "a", newReferee())
	testenv.Eventually(t, "member a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })

	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{
		Cache:    informers.Options{Namespace: ns},
		Sharding: framework.ShardingOptions{Ring: "ring", Namespace: ns, Identity: "b", Buckets: 16},
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := mgr.Start(ctx)
	if err == nil {
		t.Fatal("a member with 16 buckets joined a ring of 32")
	}
	for _, want := range []string{`"a"`, `"b"`, "32", "16"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
}

func TestShardedControllerNeedsARing(t *testing.T) {
	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "sharded", framework.ControllerOptions{Sharded: true}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}))
	if err == nil || !strings.Contains(err.Error(), "Options.Sharding.Ring") {
		t.Fatalf("Complete = %v, want an error naming Options.Sharding.Ring", err)
	}
}
