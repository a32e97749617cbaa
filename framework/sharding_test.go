package framework_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/faultproxy"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// referee counts reconciles of one key that run in two members at once,
// and logs every reconcile.
type referee struct {
	mu       sync.Mutex
	active   map[string]string // key -> member reconciling it now
	overlaps []string
	last     map[string]string // key -> member that reconciled it last
	log      []reconciled
}

// reconciled is one reconcile: by which member, of which ConfigMap (by
// name), why, and at which data version and resourceVersion.
type reconciled struct {
	member, name string
	reason       reconcile.Reason
	v, rv        string
}

func (r *referee) record(e reconciled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, e)
}

// since returns the reconciles logged from index i on, and the log's length.
func (r *referee) since(i int) ([]reconciled, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log[i:]), len(r.log)
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
	return startPacedMember(t, plane.Config(t), ns, ring, id, ref, 4, func(*corev1.ConfigMap) time.Duration { return 30 * time.Millisecond })
}

// startPacedMember is startMember reaching the API server with cfg, with
// workers workers, each reconcile waiting pause(its object) before it
// writes.
func startPacedMember(t *testing.T, cfg *rest.Config, ns, ring, id string, ref *referee, workers int, pause func(*corev1.ConfigMap) time.Duration) *member {
	t.Helper()
	return startTunedMember(t, cfg, ns, ring, id, ref, workers, pause, nil)
}

// startTunedMember is startPacedMember with the ring's options changed by
// tune (when not nil).
func startTunedMember(t *testing.T, cfg *rest.Config, ns, ring, id string, ref *referee, workers int, pause func(*corev1.ConfigMap) time.Duration, tune func(*sharding.Options)) *member {
	t.Helper()
	opts := framework.Options{Cache: informers.Options{Namespace: ns}, GracefulShutdownTimeout: 10 * time.Second}
	if ring != "" {
		opts.Sharding = sharding.Options{
			Ring:  ring,
			Lease: lease.Options{Namespace: ns, Identity: id, Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
		}
		if tune != nil {
			tune(&opts.Sharding)
		}
	}
	mgr := testenv.NewManager(t, cfg, opts)
	m := &member{id: id, mgr: mgr}
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "sharded", framework.ControllerOptions{Workers: workers, Sharded: ring != ""}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
			key := cm.Namespace + "/" + cm.Name
			ref.enter(id, key)
			defer ref.exit(id, key)
			ref.record(reconciled{member: id, name: cm.Name, reason: framework.ReasonFrom(ctx), v: cm.Data["v"], rv: cm.ResourceVersion})
			time.Sleep(pause(cm))
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

// at reports whether every ConfigMap of names was reconciled at v.
func at(t *testing.T, cs kubernetes.Interface, ns string, names []string, v int) bool {
	for _, name := range names {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || cm.Annotations[seenAnnotation] != strconv.Itoa(v) {
			return false
		}
	}
	return true
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

// configMaps creates n ConfigMaps in a new namespace.
func configMaps(t *testing.T, n int) (kubernetes.Interface, string, []*corev1.ConfigMap) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	ns := testenv.Namespace(t, cs)
	var cms []*corev1.ConfigMap
	for i := range n {
		cms = append(cms, testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%03d", i), nil))
	}
	return cs, ns, cms
}

// leave stops member m gracefully and waits until other serves every
// bucket.
func leave(t *testing.T, m, other *member) {
	t.Helper()
	m.run.Cancel()
	<-m.run.Done
	if m.run.Err != nil {
		t.Fatalf("member %s stopped with %v", m.id, m.run.Err)
	}
	testenv.Eventually(t, "member "+other.id+" serves all 32 buckets after "+m.id+" left", func() bool { return len(other.serving()) == 32 })
}

// ownedBy returns the names of the ConfigMaps whose buckets are in held.
func ownedBy(cms []*corev1.ConfigMap, held []int) []string {
	b := sharding.Buckets{By: sharding.ByUID, Count: 32}
	var names []string
	for _, cm := range cms {
		if slices.Contains(held, b.OfObject(cm)) {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	return names
}

// names returns the names of cms.
func names(cms []*corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Name)
	}
	return out
}

// caughtUp reports whether member a reconciled each object of names at
// its current resourceVersion: then a's queue owes nothing for them, not
// even the echo of its own write.
func caughtUp(t *testing.T, cs kubernetes.Interface, ns string, ref *referee, names []string) bool {
	log, _ := ref.since(0)
	for _, name := range names {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || !slices.ContainsFunc(log, func(e reconciled) bool {
			return e.member == "a" && e.name == name && e.rv == cm.ResourceVersion
		}) {
			return false
		}
	}
	return true
}

// checkHandedOver checks b's first reconcile, in the log from index from
// on, of each object in names: a change when a never reconciled it at
// version v, a replay when it was not changed.
func checkHandedOver(t *testing.T, ref *referee, from int, names, changed []string, v string) {
	t.Helper()
	var byA map[string]bool
	var firstB map[string]reconcile.Reason
	// The objects nobody changed come to b as replays behind the changes,
	// so b may still be on them once every change is reconciled.
	testenv.Eventually(t, "b reconciled each object it took over", func() bool {
		log, _ := ref.since(from)
		byA, firstB = map[string]bool{}, map[string]reconcile.Reason{}
		for _, e := range log {
			switch {
			case e.member == "a" && e.v == v:
				byA[e.name] = true
			case e.member == "b" && firstB[e.name] == "":
				firstB[e.name] = e.reason
			}
		}
		return !slices.ContainsFunc(names, func(n string) bool { return firstB[n] == "" })
	})
	owed := 0
	for _, name := range names {
		switch r := firstB[name]; {
		case !slices.Contains(changed, name):
			if r != reconcile.ReasonReplay {
				t.Errorf("b reconciled %s, which nobody changed, as a %s, want a replay", name, r)
			}
		case !byA[name]:
			owed++
			if r != reconcile.ReasonChange {
				t.Errorf("b reconciled %s, whose change to v=%s a had not reconciled, as a %s, want a change", name, v, r)
			}
		}
	}
	if owed == 0 {
		t.Fatalf("a had reconciled every change to v=%s before giving its buckets up: the test cannot tell a mark from none", v)
	}
	t.Logf("v=%s: %d of %d changed objects handed over unreconciled, all reconciled by b as changes", v, owed, len(changed))
}

// slowAfterV1 paces a member that reconciles v=1 at once and later
// versions slowly, so that with one worker its queue still owes most of a
// change when it gives buckets up.
func slowAfterV1(cm *corev1.ConfigMap) time.Duration {
	if cm.Data["v"] == "1" {
		return 0
	}
	return 300 * time.Millisecond
}

func TestShardingSplitsTheObjectsAndHandsThemOver(t *testing.T) {
	cs, ns, cms := configMaps(t, 80)
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
	leave(t, a, b)
	testenv.Eventually(t, "every ConfigMap reconciled at v=3", func() bool { return converged(t, cs, ns, 3) })

	if o := ref.seen(); len(o) > 0 {
		t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
	}
}

// A member that gives buckets up with changes still queued leaves a mark on
// each bucket's Lease, and the next holder queues the objects changed
// since as changes: the changes the old holder did not reconcile come
// first, and the objects nobody changed stay replays behind them. Both
// ways of giving up are covered: a rebalance (b joins) and a graceful
// leave (a stops). With replays only, as before marks, the changed objects
// would reach b as replays and the test fails.
func TestShardingHandsQueuedChangesOverAsChanges(t *testing.T) {
	cs, ns, cms := configMaps(t, 80)
	ref := newReferee()
	a := startPacedMember(t, plane.Config(t), ns, "ring", "a", ref, 1, slowAfterV1)
	testenv.Eventually(t, "member a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })
	setVersion(t, cs, ns, cms, 1)
	testenv.Eventually(t, "every ConfigMap reconciled at v=1", func() bool { return converged(t, cs, ns, 1) })
	// A rebalance: half the objects change, and b joins while a works
	// through them.
	var even []*corev1.ConfigMap
	for i, cm := range cms {
		if i%2 == 0 {
			even = append(even, cm)
		}
	}
	testenv.Eventually(t, "a reconciled every ConfigMap at its current version", func() bool { return caughtUp(t, cs, ns, ref, names(cms)) })
	_, from := ref.since(0)
	setVersion(t, cs, ns, even, 2)
	b := startPacedMember(t, plane.Config(t), ns, "ring", "b", ref, 4, func(*corev1.ConfigMap) time.Duration { return 0 })
	testenv.Eventually(t, "a and b serve 16 buckets each", func() bool { return len(a.serving()) == 16 && len(b.serving()) == 16 })
	testenv.Eventually(t, "every changed ConfigMap reconciled at v=2", func() bool { return at(t, cs, ns, names(even), 2) })
	checkHandedOver(t, ref, from, ownedBy(cms, b.serving()), names(even), "2")

	// A graceful leave: half of a's objects change, and a stops at once.
	var ofA, changed []*corev1.ConfigMap
	for _, cm := range cms {
		if slices.Contains(ownedBy(cms, a.serving()), cm.Name) {
			ofA = append(ofA, cm)
		}
	}
	for i, cm := range ofA {
		if i%2 == 0 {
			changed = append(changed, cm)
		}
	}
	testenv.Eventually(t, "a reconciled each of its ConfigMaps at its current version", func() bool { return caughtUp(t, cs, ns, ref, names(ofA)) })
	_, from = ref.since(0)
	setVersion(t, cs, ns, changed, 3)
	testenv.Eventually(t, "a started on v=3", func() bool {
		log, _ := ref.since(from)
		return slices.ContainsFunc(log, func(e reconciled) bool { return e.member == "a" && e.v == "3" })
	})
	leave(t, a, b)
	testenv.Eventually(t, "every changed ConfigMap reconciled at v=3", func() bool { return at(t, cs, ns, names(changed), 3) })
	checkHandedOver(t, ref, from, names(ofA), names(changed), "3")

	if o := ref.seen(); len(o) > 0 {
		t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
	}
}

// A member that crashes writes nothing as it goes, but every renewal of
// its bucket Leases carried its marks: the next holder, once the Leases
// expire, queues the changes the crashed member still owed as changes and
// the objects nobody changed as replays. The crash is a connection reset
// by a proxy between member a and the API server: a can no longer write
// anything, and stops dispatching once its Leases go unrenewed for
// RenewDeadline. Without renewal marks the changed objects reach b as
// replays and the test fails.
func TestShardingMarksSurviveACrash(t *testing.T) {
	cs, ns, cms := configMaps(t, 80)
	ref := newReferee()
	u, err := url.Parse(plane.Config(t).Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	viaProxy := rest.CopyConfig(plane.Config(t))
	viaProxy.Host = "https://" + p.Addr()

	a := startPacedMember(t, viaProxy, ns, "ring", "a", ref, 1, slowAfterV1)
	testenv.Eventually(t, "member a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })
	setVersion(t, cs, ns, cms, 1)
	testenv.Eventually(t, "every ConfigMap reconciled at v=1", func() bool { return converged(t, cs, ns, 1) })
	b := startPacedMember(t, plane.Config(t), ns, "ring", "b", ref, 4, func(*corev1.ConfigMap) time.Duration { return 0 })
	testenv.Eventually(t, "a and b serve 16 buckets each", func() bool { return len(a.serving()) == 16 && len(b.serving()) == 16 })

	// Half of a's objects change while a works through them one at a time.
	held := a.serving()
	var ofA, changed, unchanged []*corev1.ConfigMap
	for _, cm := range cms {
		if slices.Contains(ownedBy(cms, held), cm.Name) {
			ofA = append(ofA, cm)
		}
	}
	for i, cm := range ofA {
		if i%2 == 0 {
			changed = append(changed, cm)
		} else {
			unchanged = append(unchanged, cm)
		}
	}
	testenv.Eventually(t, "a reconciled each of its ConfigMaps at its current version", func() bool { return caughtUp(t, cs, ns, ref, names(ofA)) })
	// The highest resourceVersion of each of a's buckets' unchanged
	// objects: a mark above it was taken after a caught up.
	top := map[int]uint64{}
	buckets := sharding.Buckets{By: sharding.ByUID, Count: 32}
	for _, cm := range unchanged {
		cur, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), cm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv, err := strconv.ParseUint(cur.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		bk := buckets.OfObject(cm)
		top[bk] = max(top[bk], rv)
	}
	_, from := ref.since(0)
	setVersion(t, cs, ns, changed, 2)
	// (A bucket a never read an object of carries no mark: the next
	// holder's list of it holds nothing to tell apart.)
	testenv.Eventually(t, "each of a's bucket Leases carries a mark taken after a caught up", func() bool {
		for bk := range top {
			l, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), fmt.Sprintf("ring-bucket-%d", bk), metav1.GetOptions{})
			if err != nil {
				return false
			}
			var m struct {
				Marks map[string]string `json:"marks"`
			}
			if json.Unmarshal([]byte(l.Annotations["converge.dev/handover-marks"]), &m) != nil {
				return false
			}
			mark, err := strconv.ParseUint(m.Marks["sharded"], 10, 64)
			if err != nil || mark <= top[bk] {
				return false
			}
		}
		return true
	})

	// The crash: nothing a sends reaches the API server any more.
	p.SetMode(faultproxy.Reset, 0)
	testenv.Eventually(t, "member b serves all 32 buckets after a crashed", func() bool { return len(b.serving()) == 32 })
	testenv.Eventually(t, "every changed ConfigMap reconciled at v=2", func() bool { return at(t, cs, ns, names(changed), 2) })
	checkHandedOver(t, ref, from, names(ofA), names(changed), "2")

	a.run.Cancel()
	<-a.run.Done
	if o := ref.seen(); len(o) > 0 {
		t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
	}
}

// Members started together claim their own shares once: while the ring
// forms (no live member holds a bucket), a member waits FormationDelay
// before it claims, so the first one does not claim and list every bucket
// only to hand half of them over when the second appears. Each bucket
// Lease then has had one holder. The negative control, without the wait,
// shows that Lease transitions see a handover.
func TestShardingMembersStartedTogetherClaimOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		delay      time.Duration
		handedOver bool
	}{
		{"waits while the ring forms", 10 * time.Second, false},
		{"claims at once (negative control)", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ns, cms := configMaps(t, 40)
			ref := newReferee()
			start := func(id string) *member {
				return startTunedMember(t, plane.Config(t), ns, "ring", id, ref, 4,
					func(*corev1.ConfigMap) time.Duration { return 0 },
					func(o *sharding.Options) { o.FormationDelay = tc.delay })
			}
			a := start("a")
			testenv.Eventually(t, "a joined the ring", func() bool {
				st, _ := a.mgr.RingStatus()
				if tc.handedOver {
					return len(st.Serving)+len(st.Syncing) > 0
				}
				return slices.Contains(st.Members, "a") && st.Forming
			})
			b := start("b")
			testenv.Eventually(t, "a and b serve 16 buckets each", func() bool { return len(a.serving()) == 16 && len(b.serving()) == 16 })
			if st, _ := a.mgr.RingStatus(); st.Forming {
				t.Error("sharding.Status.Forming once the ring formed")
			}
			// A sharded controller built once the manager started is refused:
			// the ring hands buckets to the controllers it knew.
			_, err := framework.NewBuilder[*corev1.ConfigMap](a.mgr, "late", framework.ControllerOptions{Sharded: true}).
				Build(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) { return reconcile.Result{}, nil }))
			if err == nil || !strings.Contains(err.Error(), "before Manager.Start") {
				t.Errorf("a sharded controller built after Start: %v, want it refused", err)
			}
			var moved []string
			for i := range 32 {
				l, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), fmt.Sprintf("ring-bucket-%d", i), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if l.Spec.LeaseTransitions != nil && *l.Spec.LeaseTransitions > 0 {
					moved = append(moved, l.Name)
				}
			}
			if got := len(moved) > 0; got != tc.handedOver {
				t.Errorf("bucket Leases that changed holder: %v; want some: %v", moved, tc.handedOver)
			}
			setVersion(t, cs, ns, cms, 1)
			testenv.Eventually(t, "every ConfigMap reconciled at v=1", func() bool { return converged(t, cs, ns, 1) })
			if o := ref.seen(); len(o) > 0 {
				t.Errorf("%d reconciles ran in two members at once: %v", len(o), o)
			}
		})
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

// A member of another layout (16 buckets against the ring's 32) runs but
// is refused: its readiness names both members and both layouts, and it
// holds no bucket while the ring's members live.
func TestShardingRefusesAnIncompatibleMember(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	ns := testenv.Namespace(t, cs)
	a := startMember(t, ns, "ring", "a", newReferee())
	testenv.Eventually(t, "member a serves all 32 buckets", func() bool { return len(a.serving()) == 32 })

	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{
		Cache:                  informers.Options{Namespace: ns},
		HealthProbeBindAddress: "127.0.0.1:0",
		Sharding:               sharding.Options{Ring: "ring", Buckets: sharding.Buckets{Count: 16}, Lease: lease.Options{Namespace: ns, Identity: "b"}},
	})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "sharded", framework.ControllerOptions{Sharded: true}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "member b is refused", func() bool {
		st, _ := mgr.RingStatus()
		return st.Refused != ""
	})
	st, _ := mgr.RingStatus()
	for _, want := range []string{`"a"`, `"b"`, "32 buckets", "16 buckets"} {
		if !strings.Contains(st.Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, st.Refused)
		}
	}
	if len(st.Serving)+len(st.Syncing) > 0 {
		t.Errorf("the refused member holds buckets: %+v", st)
	}
	resp, err := http.Get("http://" + mgr.HealthProbeAddress() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "16 buckets") {
		t.Errorf("/readyz of the refused member: %d %s, want not ready, naming the layouts", resp.StatusCode, body)
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
