package framework_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// nsRing is a ring sharded by namespace over parents (ConfigMaps named
// "parent", one per namespace) that each own a Secret "child", all
// labelled with the run's label so that the members' caches hold nothing
// else of the cluster.
type nsRing struct {
	cs         kubernetes.Interface
	run        string // the label value of the run's objects
	leases     string // namespace of the ring's Leases
	namespaces []string
	ref        *referee
	// log, when set, is the members' logger.
	log logr.Logger

	mu sync.Mutex
	// misplaced holds the reconciles whose context did not name their
	// object's bucket (sharding.BucketFrom); mu guards it.
	misplaced []string
}

const runLabel = "test.converge.dev/run"

// newNSRing makes the namespace of a ring's Leases.
func newNSRing(t *testing.T) *nsRing {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	r := &nsRing{cs: cs, run: strconv.FormatInt(time.Now().UnixNano(), 36), ref: newReferee()}
	r.leases = r.namespace(t, "leases-"+r.run)
	return r
}

// namespace creates namespace name until the test ends.
func (r *nsRing) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := r.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// addParents makes, for each member of ms, n namespaces in buckets it
// serves, each with a parent: which buckets a member gets is known only
// once it serves them.
func (r *nsRing) addParents(t *testing.T, n int, ms ...*nsMember) {
	t.Helper()
	b := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	need := make([]int, len(ms))
	for i := range need {
		need[i] = n
	}
	for i := 0; slices.Max(need) > 0; i++ {
		name := fmt.Sprintf("p%d-%s", i, r.run)
		m := slices.IndexFunc(ms, func(m *nsMember) bool { return slices.Contains(m.serving(), b.Of(name)) })
		if m < 0 || need[m] == 0 {
			continue
		}
		need[m]--
		ns := r.namespace(t, name)
		r.namespaces = append(r.namespaces, ns)
		_, err := r.cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "parent", Labels: map[string]string{runLabel: r.run}},
			Data:       map[string]string{"v": "0"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(r.namespaces)
}

// nsMember is one member of an nsRing.
type nsMember struct {
	*member
}

// start starts member id: a controller of the parents, sharded with key,
// that owns their Secrets through own (a Builder call adding the source),
// and writes each parent's data v into its child.
func (r *nsRing) start(t *testing.T, id string, key sharding.Field, own func(*framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap]) *nsMember {
	t.Helper()
	sel := informers.Selection{Labels: labels.SelectorFromSet(labels.Set{runLabel: r.run})}
	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{
		Logger: r.log,
		Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{
			{Kind: "ConfigMap"}: sel, {Kind: "Secret"}: sel,
		}},
		GracefulShutdownTimeout: 10 * time.Second,
		Sharding: sharding.Options{
			Ring:    "ns-ring",
			Buckets: sharding.Buckets{By: key},
			Lease:   lease.Options{Namespace: r.leases, Identity: id, Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
		},
	})
	m := &nsMember{&member{id: id, mgr: mgr}}
	b := framework.NewBuilder[*corev1.ConfigMap](mgr, "parents", framework.ControllerOptions{Sharded: true})
	err := own(b).Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
		k := cm.Namespace + "/" + cm.Name
		r.ref.enter(id, k)
		defer r.ref.exit(id, k)
		r.ref.record(reconciled{member: id, name: k, reason: framework.ReasonFrom(ctx), v: cm.Data["v"], rv: cm.ResourceVersion})
		if b, of, ok := sharding.BucketFrom(ctx); !ok || of.By != key || b != of.OfObject(cm) {
			r.mu.Lock()
			r.misplaced = append(r.misplaced, fmt.Sprintf("%s in bucket %d of %v (%v)", k, b, of, ok))
			r.mu.Unlock()
		}
		child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: cm.Namespace}}
		_, err := controllerutil.CreateOrUpdate(ctx, mgr.Client(), child, func() error {
			child.Labels = map[string]string{runLabel: r.run}
			child.Data = map[string][]byte{"v": []byte(cm.Data["v"])}
			return controllerutil.SetControllerReference(cm, child, mgr.Scheme())
		})
		return reconcile.Result{}, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	m.run = testenv.StartManager(t, mgr)
	return m
}

// startPair starts members a and b, which own the parents' Secrets, waits
// until they share the buckets, makes n parents in each one's buckets and
// waits until every parent's child holds v=1.
func (r *nsRing) startPair(t *testing.T, n int) (a, b *nsMember) {
	t.Helper()
	owns := func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
		return b.Owns(&corev1.Secret{})
	}
	a = r.start(t, "a", sharding.ByNamespace, owns)
	b = r.start(t, "b", sharding.ByNamespace, owns)
	testenv.Eventually(t, "a and b serve 16 buckets each", func() bool { return len(a.serving()) == 16 && len(b.serving()) == 16 })
	r.addParents(t, n, a, b)
	r.setParents(t, r.namespaces, "1")
	testenv.Eventually(t, "every child at v=1", func() bool { return r.childAt(t, r.namespaces, "1") })
	return a, b
}

// bucketsOf returns the namespaces of r whose buckets are in held.
func (r *nsRing) bucketsOf(held []int) []string {
	b := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	var out []string
	for _, ns := range r.namespaces {
		if slices.Contains(held, b.Of(ns)) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// cachedChildren returns the namespaces of the Secrets m's cache holds (its
// reads route to its held buckets), nil when it cannot say now.
func (m *nsMember) cachedChildren(t *testing.T) []string {
	var list corev1.SecretList
	if err := m.mgr.Cache().List(t.Context(), &list); err != nil {
		t.Log(err)
		return nil
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Namespace)
	}
	slices.Sort(out)
	return out
}

// secretInformers returns the descriptions of m's informers of Secrets.
func (m *nsMember) secretInformers() []string {
	var out []string
	for _, st := range m.mgr.Cache().Stats() {
		if st.Kind.Kind == "Secret" {
			out = append(out, st.Description)
		}
	}
	return out
}

// dropped returns how many keys m's controller dropped because another
// member holds their bucket.
func (m *nsMember) dropped(t *testing.T) float64 {
	t.Helper()
	families, err := m.mgr.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() == "converge_shard_keys_dropped_total" {
			for _, metric := range f.GetMetric() {
				n += metric.GetCounter().GetValue()
			}
		}
	}
	return n
}

// childAt reports whether the child of every namespace of nss holds v.
func (r *nsRing) childAt(t *testing.T, nss []string, v string) bool {
	for _, ns := range nss {
		s, err := r.cs.CoreV1().Secrets(ns).Get(t.Context(), "child", metav1.GetOptions{})
		if err != nil || string(s.Data["v"]) != v {
			return false
		}
	}
	return true
}

// setParents sets data v of the parents of nss.
func (r *nsRing) setParents(t *testing.T, nss []string, v string) {
	t.Helper()
	for _, ns := range nss {
		patch := fmt.Sprintf(`{"data":{"v":%q}}`, v)
		if _, err := r.cs.CoreV1().ConfigMaps(ns).Patch(t.Context(), "parent", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// drift changes the child of every namespace of nss by hand.
func (r *nsRing) drift(t *testing.T, nss []string) {
	t.Helper()
	for _, ns := range nss {
		patch := `{"data":{"v":"ZHJpZnQ="}}` // "drift"
		if _, err := r.cs.CoreV1().Secrets(ns).Patch(t.Context(), "child", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// reconciledBy returns the members that reconciled the parent of ns in the
// log from index from on.
func (r *nsRing) reconciledBy(from int, ns string) []string {
	log, _ := r.ref.since(from)
	var out []string
	for _, e := range log {
		if e.name == ns+"/parent" && !slices.Contains(out, e.member) {
			out = append(out, e.member)
		}
	}
	return out
}

// With the ring sharded by namespace, the Secrets a sharded controller
// owns are read per bucket like its ConfigMaps: each member caches the
// children of its buckets' namespaces only (no informer of all Secrets),
// and answers a read of another member's child with ErrNotCached; a child
// changed by hand reconciles its parent on the member that holds the
// parent; when a member leaves, the other caches its children too and
// takes them over.
func TestShardingByNamespaceReadsOwnedKindsPerBucket(t *testing.T) {
	r := newNSRing(t)
	a, b := r.startPair(t, 4)

	nsA, nsB := r.bucketsOf(a.serving()), r.bucketsOf(b.serving())
	for _, m := range []*nsMember{a, b} {
		want := r.bucketsOf(m.serving())
		testenv.Eventually(t, "member "+m.id+" caches the children of its buckets' namespaces only", func() bool {
			return slices.Equal(m.cachedChildren(t), want)
		})
		for _, d := range m.secretInformers() {
			if !strings.Contains(d, "in shard") {
				t.Errorf("member %s has an informer of Secrets that is not a bucket's: %s", m.id, d)
			}
		}
	}

	// A read of a child in a namespace of the other member's buckets fails
	// with ErrNotCached naming the namespace, not NotFound: it exists.
	var s corev1.Secret
	err := a.mgr.Cache().Get(t.Context(), types.NamespacedName{Namespace: nsB[0], Name: "child"}, &s)
	if !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), nsB[0]) {
		t.Errorf("a's read of a child in b's namespace %s: %v, want ErrNotCached naming the namespace", nsB[0], err)
	}

	// Drift: each parent is reconciled again on the member that holds it,
	// and no other, and the other never even sees the child's change: it
	// drops no key (a member caching the Secrets whole would map the
	// change to the parent and drop it).
	_, from := r.ref.since(0)
	droppedA, droppedB := a.dropped(t), b.dropped(t)
	r.drift(t, r.namespaces)
	testenv.Eventually(t, "every drifted child restored", func() bool { return r.childAt(t, r.namespaces, "1") })
	if da, db := a.dropped(t)-droppedA, b.dropped(t)-droppedB; da != 0 || db != 0 {
		t.Errorf("the members dropped %v and %v keys while the children drifted, want none: a child's change reaches its parent's member only", da, db)
	}
	for _, ns := range r.namespaces {
		want := "a"
		if slices.Contains(nsB, ns) {
			want = "b"
		}
		if got := r.reconciledBy(from, ns); !slices.Equal(got, []string{want}) {
			t.Errorf("the parent in %s was reconciled after its child drifted by %v, want %s only", ns, got, want)
		}
	}

	// a leaves: b caches every child and reverts drift everywhere.
	a.run.Cancel()
	<-a.run.Done
	testenv.Eventually(t, "b serves all 32 buckets", func() bool { return len(b.serving()) == 32 })
	testenv.Eventually(t, "b caches every child", func() bool { return slices.Equal(b.cachedChildren(t), r.namespaces) })
	r.drift(t, nsA)
	testenv.Eventually(t, "the children of a's namespaces restored by b", func() bool { return r.childAt(t, nsA, "1") })
	r.setParents(t, r.namespaces, "2")
	testenv.Eventually(t, "every child at v=2", func() bool { return r.childAt(t, r.namespaces, "2") })

	if o := r.ref.seen(); len(o) > 0 {
		t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.misplaced) > 0 {
		t.Errorf("reconciles whose context does not name their object's bucket (sharding.BucketFrom): %v", r.misplaced)
	}
}

// Which sources a member reads per bucket, and which it caches whole; the
// children are looked after either way. A Map source (whose function may
// map anywhere) is cached whole unless marked SameNamespace; OwnsMetadata
// is read per bucket in metadata (the reconciler's typed reads of the
// Secrets then make a whole typed informer, as they would unsharded); in a
// ring sharded by UID owned kinds are cached whole (a child's UID is not
// its parent's).
func TestShardingReadsPerBucketOnlyWhatStaysInItsNamespace(t *testing.T) {
	byName := func(_ context.Context, s *corev1.Secret) []reconcile.Request {
		return []reconcile.Request{{Namespace: s.Namespace, Name: "parent"}}
	}
	type own = func(*framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap]
	cases := []struct {
		name string
		key  sharding.Field
		own  own
		// perBucket and whole are the informers of Secrets expected: of
		// each bucket, and of the whole kind.
		perBucket, whole bool
		// noDrift skips the drift check: the reconciler reads the typed
		// Secret from another informer than the one whose event woke it,
		// which may not have seen the change yet, sharded or not.
		noDrift bool
	}{
		{"a Map source", sharding.ByNamespace, func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
			return b.Watches(framework.Map(byName))
		}, false, true, false},
		{"a SameNamespace Map source", sharding.ByNamespace, func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
			return b.Watches(framework.SameNamespace(framework.Map(byName)))
		}, true, false, false},
		{"OwnsMetadata", sharding.ByNamespace, func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
			return b.OwnsMetadata(&corev1.Secret{})
		}, true, true, true},
		{"owned kinds in a ring by UID", sharding.ByUID, func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
			return b.Owns(&corev1.Secret{})
		}, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newNSRing(t)
			a := r.start(t, "a", tc.key, tc.own)
			testenv.Eventually(t, "a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })
			r.addParents(t, 4, a)
			r.setParents(t, r.namespaces, "1")
			testenv.Eventually(t, "every child at v=1", func() bool { return r.childAt(t, r.namespaces, "1") })
			var perBucket, whole bool
			for _, d := range a.secretInformers() {
				if strings.Contains(d, "in shard") {
					perBucket = true
				} else {
					whole = true
				}
			}
			if perBucket != tc.perBucket || whole != tc.whole {
				t.Errorf("informers of Secrets %v: per bucket %v, whole %v; want %v, %v", a.secretInformers(), perBucket, whole, tc.perBucket, tc.whole)
			}
			if tc.noDrift {
				return
			}
			r.drift(t, r.namespaces)
			testenv.Eventually(t, "every drifted child restored", func() bool { return r.childAt(t, r.namespaces, "1") })
		})
	}
}

// A kind some other reader of the process caches whole is read from that
// informer, which holds every bucket's objects, and from the buckets again
// once it stops.
func TestShardingReadsAWholeInformerWhenThereIsOne(t *testing.T) {
	r := newNSRing(t)
	a, _ := r.startPair(t, 2)
	mine := r.bucketsOf(a.serving())
	testenv.Eventually(t, "a caches the children of its buckets", func() bool { return slices.Equal(a.cachedChildren(t), mine) })

	// A reader of the whole kind appears in a (an unsharded controller's
	// source would make the same informer): a's reads go to it.
	whole, err := informers.For[*corev1.Secret](a.mgr.Cache(), informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := whole.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a's reads of Secrets see every namespace", func() bool { return slices.Equal(a.cachedChildren(t), r.namespaces) })

	// Once it stops, a's reads go to its buckets again, and make no
	// informer of the whole kind.
	whole.Stop()
	testenv.Eventually(t, "a's reads of Secrets see its buckets again", func() bool { return slices.Equal(a.cachedChildren(t), mine) })
	for _, d := range a.secretInformers() {
		if !strings.Contains(d, "in shard") {
			t.Errorf("a read made an informer of the whole kind: %s", d)
		}
	}
}

// A cluster-scoped kind sharded by namespace has no namespace to follow:
// the namespaced kinds it owns (in every namespace) are cached whole.
func TestShardingByNamespaceCachesAClusterScopedKindsChildrenWhole(t *testing.T) {
	r := newNSRing(t)
	sel := informers.Selection{Labels: labels.SelectorFromSet(labels.Set{runLabel: r.run})}
	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{
		Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{
			{Kind: "Namespace"}: sel, {Kind: "ConfigMap"}: sel,
		}},
		Sharding: sharding.Options{
			Ring:    "ns-ring",
			Buckets: sharding.Buckets{By: sharding.ByNamespace},
			Lease:   lease.Options{Namespace: r.leases, Identity: "a", Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
		},
	})
	err := framework.NewBuilder[*corev1.Namespace](mgr, "namespaces", framework.ControllerOptions{Sharded: true}).
		Owns(&corev1.ConfigMap{}).
		Complete(reconcile.ObjectFunc[*corev1.Namespace](func(context.Context, *corev1.Namespace) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "the member serves all 32 buckets", func() bool {
		st, _ := mgr.RingStatus()
		return len(st.Serving) == 32
	})
	var cms []string
	for _, st := range mgr.Cache().Stats() {
		if st.Kind.Kind == "ConfigMap" {
			cms = append(cms, st.Description)
		}
	}
	if len(cms) != 1 || strings.Contains(cms[0], "in shard") {
		t.Errorf("informers of ConfigMaps %v, want one of the whole kind", cms)
	}
}

// A SameNamespace source whose function maps an object into another
// namespace breaks its promise: the member still queues the request, and
// logs it once per bucket, naming the source, the object and the request.
func TestShardingSameNamespaceLogsAStrayRequest(t *testing.T) {
	r := newNSRing(t)
	var (
		mu    sync.Mutex
		lines []string
	)
	r.log = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	stray := func(_ context.Context, s *corev1.Secret) []reconcile.Request {
		return []reconcile.Request{{Namespace: r.leases, Name: "parent"}}
	}
	a := r.start(t, "a", sharding.ByNamespace, func(b *framework.Builder[*corev1.ConfigMap]) *framework.Builder[*corev1.ConfigMap] {
		return b.Watches(framework.SameNamespace(framework.Map(stray)))
	})
	testenv.Eventually(t, "a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })
	r.addParents(t, 3, a)
	r.setParents(t, r.namespaces, "1")
	testenv.Eventually(t, "every child at v=1", func() bool { return r.childAt(t, r.namespaces, "1") })
	r.drift(t, r.namespaces)
	buckets := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	held := map[int]bool{}
	for _, ns := range r.namespaces {
		held[buckets.Of(ns)] = true
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "mapped an object to a request in another namespace") && strings.Contains(l, r.leases+"/parent") {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, "the stray requests logged", func() bool { return count() > 0 })
	if n := count(); n > len(held) {
		t.Errorf("%d lines about stray requests, want at most one per bucket of the children (%d)", n, len(held))
	}
}
