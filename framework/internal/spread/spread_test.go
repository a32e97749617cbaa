package spread_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/namespaces"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// unique is prefix with a suffix no earlier run used: the namespaces a
// test labels outlive it while they terminate.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%06x", prefix, time.Now().UnixNano()&0xffffff)
}

// interval is one engagement of a cluster by a member, as its Listener
// heard it; end is zero while it lasts.
type interval struct {
	member, cluster string
	start, end      time.Time
}

// referee records every member's engagements, and the ConfigMap versions
// their reconciles saw; with ownNS set, the reconciles of the manager's
// own cluster's ConfigMaps in that namespace too.
type referee struct {
	mu        sync.Mutex
	intervals []*interval
	seen      map[string]string // "<cluster>/<name>" -> resourceVersion reconciled last
	ownNS     string
	own       []*interval // reconciles of own keys in ownNS, cluster "" and member
}

func newReferee() *referee { return &referee{seen: map[string]string{}} }

// listener is member's cluster.Listener.
type listener struct {
	r      *referee
	member string
}

func (l listener) Engaged(c *cluster.Cluster) {
	if c.Name() == "" {
		return
	}
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.r.intervals = append(l.r.intervals, &interval{member: l.member, cluster: c.Name(), start: time.Now()})
}

func (l listener) Disengaged(c *cluster.Cluster) {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	for _, i := range l.r.intervals {
		if i.member == l.member && i.cluster == c.Name() && i.end.IsZero() {
			i.end = time.Now()
		}
	}
}

// holders returns, by cluster, the members engaging it now.
func (r *referee) holders() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, i := range r.intervals {
		if i.end.IsZero() {
			out[i.cluster] = append(out[i.cluster], i.member)
		}
	}
	return out
}

// overlaps counts the pairs of engagements of one cluster by two members
// that overlap in time.
func (r *referee) overlaps() (n int, first string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	far := time.Now().Add(time.Hour)
	for a, x := range r.intervals {
		for _, y := range r.intervals[a+1:] {
			xe, ye := x.end, y.end
			if xe.IsZero() {
				xe = far
			}
			if ye.IsZero() {
				ye = far
			}
			if x.cluster == y.cluster && x.member != y.member && x.start.Before(ye) && y.start.Before(xe) {
				if n++; first == "" {
					first = fmt.Sprintf("%s engaged by %s [%v, %v] and %s [%v, %v]", x.cluster, x.member, x.start.Format(time.StampMicro), x.end.Format(time.StampMicro), y.member, y.start.Format(time.StampMicro), y.end.Format(time.StampMicro))
				}
			}
		}
	}
	return n, first
}

func (r *referee) reconciled(key, rv string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key] == rv
}

// member starts a manager of identity id on the plane, in ring ring of
// Lease namespace leaseNS, whose providers engage the namespaces labelled
// spread=label, with a ConfigMap controller of many clusters; r records
// what it does.
func member(t *testing.T, id, ring, leaseNS, label string, clusters bool, r *referee) (*framework.Manager, *testenv.Run) {
	t.Helper()
	sh := sharding.Options{}
	if ring != "" {
		sh = sharding.Options{Ring: ring, Clusters: clusters}
	}
	return memberWith(t, id, leaseNS, label, framework.Options{Sharding: sh}, r, nil)
}

// memberWith is member with the sharding and leader election of opts
// (whose Lease namespace, identity and timings are set here); setup, when
// not nil, builds more controllers before the manager starts.
func memberWith(t *testing.T, id, leaseNS, label string, opts framework.Options, r *referee, setup func(*framework.Manager)) (*framework.Manager, *testenv.Run) {
	t.Helper()
	quick := lease.Options{Namespace: leaseNS, Identity: id, Duration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}
	if opts.Sharding.Ring != "" {
		opts.Sharding.Lease, opts.Sharding.HandoverTimeout = quick, 5*time.Second
	}
	if opts.LeaderElection.Enabled {
		opts.LeaderElection.Lease = quick
	}
	opts.Clusters = cluster.Options{
		Providers: []cluster.Provider{namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{"spread": label})})},
	}
	mgr := testenv.NewManager(t, plane.Config(t), opts)
	mgr.Clusters().Subscribe(listener{r, id})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "cms", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Cluster == "" && (r.ownNS == "" || req.Namespace != r.ownNS) {
				return reconcile.Result{}, nil
			}
			start := time.Now()
			var cm corev1.ConfigMap
			if err := cluster.From(ctx).Client().Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &cm); err != nil {
				return reconcile.Result{}, nil // deleted meanwhile
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[req.Cluster+"/"+req.Name] = cm.ResourceVersion
			if req.Cluster == "" {
				r.own = append(r.own, &interval{member: id, start: start, end: time.Now()})
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(mgr)
	}
	return mgr, testenv.StartManager(t, mgr)
}

// ownReconcilers returns the members that reconciled a key of the manager's
// own cluster in r.ownNS, sorted, and the first pair of such reconciles by
// two members that overlapped in time.
func (r *referee) ownReconcilers() (members []string, overlap string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, x := range r.own {
		if !slices.Contains(members, x.member) {
			members = append(members, x.member)
		}
		for _, y := range r.own[a+1:] {
			if overlap == "" && x.member != y.member && x.start.Before(y.end) && y.start.Before(x.end) {
				overlap = fmt.Sprintf("%s [%v, %v] and %s [%v, %v]", x.member, x.start.Format(time.StampMicro), x.end.Format(time.StampMicro), y.member, y.start.Format(time.StampMicro), y.end.Format(time.StampMicro))
			}
		}
	}
	slices.Sort(members)
	return members, overlap
}

// spreadNamespaces makes n namespaces labelled spread=label, each with
// ConfigMap "cm", and returns their names.
func spreadNamespaces(t *testing.T, cs kubernetes.Interface, label string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", label, i), Labels: map[string]string{"spread": label}}}
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(t.Context()), ns.Name, metav1.DeleteOptions{})
		})
		testenv.CreateConfigMap(t, cs, ns.Name, "cm", nil)
		names = append(names, ns.Name)
	}
	return names
}

// touch changes ConfigMap cm of every namespace of names, and returns the
// keys and versions a reconcile must see.
func touch(t *testing.T, cs kubernetes.Interface, names []string, v string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, ns := range names {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": v}
		if cm, err = cs.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[ns+"/cm"] = cm.ResourceVersion
	}
	return want
}

func allReconciled(r *referee, want map[string]string) bool {
	for k, rv := range want {
		if !r.reconciled(k, rv) {
			return false
		}
	}
	return true
}

// balanced reports whether every cluster of names is engaged by exactly
// one of members, and each member engages count of them.
func balanced(r *referee, names, members []string, count int) bool {
	h := r.holders()
	load := map[string]int{}
	for _, n := range names {
		if len(h[n]) != 1 {
			return false
		}
		load[h[n][0]]++
	}
	for _, m := range members {
		if load[m] != count {
			return false
		}
	}
	return true
}

func TestClustersAreSpreadOverTheRingAndMoveWithoutADouble(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	label := unique("spread")
	names := spreadNamespaces(t, cs, label, 6)
	r := newReferee()
	var runs []*testenv.Run
	for _, id := range []string{"m0", "m1", "m2"} {
		_, run := member(t, id, "spread", leaseNS, label, true, r)
		runs = append(runs, run)
	}
	testenv.Eventually(t, "each namespace is engaged by one member, two each", func() bool { return balanced(r, names, []string{"m0", "m1", "m2"}, 2) })
	want := touch(t, cs, names, "1")
	testenv.Eventually(t, "every ConfigMap change is reconciled", func() bool { return allReconciled(r, want) })

	runs[0].Cancel()
	<-runs[0].Done
	testenv.Eventually(t, "m0's namespaces move to the others, three each", func() bool { return balanced(r, names, []string{"m1", "m2"}, 3) })
	want = touch(t, cs, names, "2")
	testenv.Eventually(t, "every ConfigMap change after the move is reconciled", func() bool { return allReconciled(r, want) })
	if n, first := r.overlaps(); n > 0 {
		t.Errorf("%d overlapping engagements, first: %s", n, first)
	}
}

// Negative control: without spreading, every member engages every
// namespace, and the referee sees the doubles.
func TestRefereeSeesDoublesWithoutSpreading(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	label := unique("double")
	names := spreadNamespaces(t, cs, label, 2)
	r := newReferee()
	member(t, "m0", "", "", label, false, r)
	member(t, "m1", "", "", label, false, r)
	testenv.Eventually(t, "both members engage both namespaces", func() bool {
		h := r.holders()
		return len(h[names[0]]) == 2 && len(h[names[1]]) == 2
	})
	if n, _ := r.overlaps(); n < 2 {
		t.Errorf("the referee counted %d overlapping engagements of 2 namespaces by 2 members, want at least 2", n)
	}
}

// Two members whose providers select other namespaces: the second is
// refused, naming both layouts, and engages nothing.
func TestMembersFindingClustersOtherwiseRefuseEachOther(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	a, b := unique("sa"), unique("sb")
	names := spreadNamespaces(t, cs, a, 2)
	spreadNamespaces(t, cs, b, 2)
	r := newReferee()
	first, _ := member(t, "m0", "spread", leaseNS, a, true, r)
	testenv.Eventually(t, "the first member engages its namespaces", func() bool { return balanced(r, names, []string{"m0"}, 2) })
	second, _ := member(t, "m1", "spread", leaseNS, b, true, r)
	testenv.Eventually(t, "the second member is refused", func() bool {
		s, _ := second.RingStatus()
		return s.Refused != ""
	})
	s, _ := second.RingStatus()
	for _, l := range []string{"clusters of namespaces(labels: spread=" + a + ")", "clusters of namespaces(labels: spread=" + b + ")"} {
		if !strings.Contains(s.Refused, l) {
			t.Errorf("the refusal does not name %q: %s", l, s.Refused)
		}
	}
	if s.Clusters != nil && len(s.Clusters.Serving)+len(s.Clusters.Syncing) > 0 || len(s.Serving)+len(s.Syncing) > 0 {
		t.Errorf("the refused member holds %+v and buckets %v %v", s.Clusters, s.Serving, s.Syncing)
	}
	for c, hs := range r.holders() {
		for _, h := range hs {
			if h == "m1" {
				t.Errorf("the refused member engaged %s", c)
			}
		}
	}
	if fs, _ := first.RingStatus(); fs.Refused != "" {
		t.Errorf("the first member is refused too: %s", fs.Refused)
	}
}

// elected returns the identities of the members of mgrs (by id) that
// have led, sorted: a member's Elected stays closed once it led.
func elected(mgrs map[string]*framework.Manager) []string {
	var out []string
	for id, m := range mgrs {
		select {
		case <-m.Elected():
			out = append(out, id)
		default:
		}
	}
	slices.Sort(out)
	return out
}

// With leader election, every member serves the clusters it holds, and
// only a member that leads reconciles the manager's own cluster's keys of
// a controller of many clusters; once the leader stops, another member
// takes the own cluster over, and no two members ever reconciled its keys
// at once.
func TestOwnClusterIsReconciledByTheLeaderAlone(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	label := unique("lead")
	names := spreadNamespaces(t, cs, label, 6)
	r := newReferee()
	r.ownNS = testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, r.ownNS, "cm", nil)
	ids := []string{"m0", "m1", "m2"}
	mgrs, runs := map[string]*framework.Manager{}, map[string]*testenv.Run{}
	for _, id := range ids {
		mgrs[id], runs[id] = memberWith(t, id, leaseNS, label, framework.Options{
			Sharding:       sharding.Options{Ring: "lead", Clusters: true},
			LeaderElection: framework.LeaderElectionOptions{Enabled: true, ID: "lead"},
		}, r, nil)
	}
	testenv.Eventually(t, "each namespace is engaged by one member, two each", func() bool { return balanced(r, names, ids, 2) })
	testenv.Eventually(t, "a member leads", func() bool { return len(elected(mgrs)) > 0 })
	leader := elected(mgrs)[0]
	want := touchAll(t, cs, r, names, "1")
	testenv.Eventually(t, "every cluster's change, and the own cluster's, is reconciled", func() bool { return allReconciled(r, want) })
	// Only members that led reconciled the own cluster (on a loaded
	// machine a leader may lose its lease, and another take over).
	onlyLeaders := func() {
		t.Helper()
		got, overlap := r.ownReconcilers()
		led := elected(mgrs)
		if slices.ContainsFunc(got, func(id string) bool { return !slices.Contains(led, id) }) {
			t.Fatalf("the own cluster's keys were reconciled by %v, of which only %v led", got, led)
		}
		if overlap != "" {
			t.Fatalf("two members reconciled the own cluster's keys at once: %s", overlap)
		}
	}
	onlyLeaders()

	runs[leader].Cancel()
	<-runs[leader].Done
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == leader })
	testenv.Eventually(t, "the leader's namespaces move to the others, three each", func() bool { return balanced(r, names, rest, 3) })
	testenv.Eventually(t, "another member leads", func() bool { return len(elected(mgrs)) > 1 })
	want = touchAll(t, cs, r, names, "2")
	testenv.Eventually(t, "every change after the move is reconciled", func() bool { return allReconciled(r, want) })
	onlyLeaders()
	if n, first := r.overlaps(); n > 0 {
		t.Errorf("%d overlapping engagements, first: %s", n, first)
	}
}

// touchAll is touch of names and of r.ownNS, whose ConfigMap the
// referee sees as the manager's own cluster's ("/cm").
func touchAll(t *testing.T, cs kubernetes.Interface, r *referee, names []string, v string) map[string]string {
	t.Helper()
	want := touch(t, cs, names, v)
	want["/cm"] = touch(t, cs, []string{r.ownNS}, v)[r.ownNS+"/cm"]
	return want
}

// bucketLeases counts the bucket Leases in namespace ns.
func bucketLeases(t *testing.T, cs kubernetes.Interface, ns string) int {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "converge.dev/ring-role=bucket"})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// A ring that spreads clusters and runs no sharded controller claims no
// bucket Lease, and its layout says so; a member that runs a sharded
// controller too is another layout: it is refused, naming both, and holds
// nothing, while the first member keeps every cluster.
func TestRingOfClustersAloneClaimsNoBucket(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	label := unique("nobucket")
	names := spreadNamespaces(t, cs, label, 2)
	r := newReferee()
	first, _ := member(t, "m0", "nb", leaseNS, label, true, r)
	testenv.Eventually(t, "the first member engages both namespaces", func() bool { return balanced(r, names, []string{"m0"}, 2) })
	if n := bucketLeases(t, cs, leaseNS); n != 0 {
		t.Errorf("a ring without sharded controllers made %d bucket Leases, want none", n)
	}
	if s, _ := first.RingStatus(); s.Buckets.Count != 0 || len(s.Serving)+len(s.Syncing) > 0 {
		t.Errorf("a ring without sharded controllers reports buckets %+v, serving %v, syncing %v", s.Buckets, s.Serving, s.Syncing)
	}

	second, _ := memberWith(t, "m1", leaseNS, label, framework.Options{Sharding: sharding.Options{Ring: "nb", Clusters: true}}, r, shardedSecrets(t))
	testenv.Eventually(t, "the member with a sharded controller is refused", func() bool {
		s, _ := second.RingStatus()
		return s.Refused != ""
	})
	s, _ := second.RingStatus()
	for _, want := range []string{`"m0"`, `"m1"`, "no buckets (no sharded controllers), clusters of namespaces", "32 buckets by object.metadata.uid, sharded controllers: secrets (Secret), clusters of namespaces"} {
		if !strings.Contains(s.Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, s.Refused)
		}
	}
	if len(s.Serving)+len(s.Syncing) > 0 || s.Clusters != nil && len(s.Clusters.Serving)+len(s.Clusters.Syncing) > 0 {
		t.Errorf("the refused member holds buckets %v %v and clusters %+v", s.Serving, s.Syncing, s.Clusters)
	}
	if n := bucketLeases(t, cs, leaseNS); n != 0 {
		t.Errorf("the refused member made %d bucket Leases", n)
	}
	if !balanced(r, names, []string{"m0"}, 2) {
		t.Errorf("the first member lost clusters to the refused one: %v", r.holders())
	}
}

// shardedSecrets builds a sharded controller of Secrets that does nothing.
func shardedSecrets(t *testing.T) func(*framework.Manager) {
	return func(mgr *framework.Manager) {
		err := framework.NewBuilder[*corev1.Secret](mgr, "secrets", framework.ControllerOptions{Sharded: true}).
			Complete(reconcile.ObjectFunc[*corev1.Secret](func(context.Context, *corev1.Secret) (reconcile.Result, error) { return reconcile.Result{}, nil }))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The other way round: a member without sharded controllers that meets a
// ring held by one with them is refused and holds nothing, and the first
// keeps serving every bucket and every cluster.
func TestRingWithShardedControllersRefusesAMemberOfClustersAlone(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	label := unique("withbucket")
	names := spreadNamespaces(t, cs, label, 2)
	r := newReferee()
	first, _ := memberWith(t, "m0", leaseNS, label, framework.Options{Sharding: sharding.Options{Ring: "wb", Clusters: true}}, r, shardedSecrets(t))
	testenv.Eventually(t, "the first member serves every bucket and both namespaces", func() bool {
		s, _ := first.RingStatus()
		return len(s.Serving) == 32 && balanced(r, names, []string{"m0"}, 2)
	})
	second, _ := member(t, "m1", "wb", leaseNS, label, true, r)
	testenv.Eventually(t, "the member without sharded controllers is refused", func() bool {
		s, _ := second.RingStatus()
		return s.Refused != ""
	})
	s, _ := second.RingStatus()
	for _, want := range []string{`"m0"`, `"m1"`, "no buckets (no sharded controllers), clusters of namespaces", "32 buckets by object.metadata.uid, sharded controllers: secrets (Secret)"} {
		if !strings.Contains(s.Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, s.Refused)
		}
	}
	if s.Clusters != nil && len(s.Clusters.Serving)+len(s.Clusters.Syncing) > 0 {
		t.Errorf("the refused member holds clusters %+v", s.Clusters)
	}
	// Asked until true: on a loaded machine a renewal may miss its
	// deadline, and the first member then syncs a fenced bucket again.
	testenv.Eventually(t, "the first member still serves every bucket and both namespaces", func() bool {
		fs, _ := first.RingStatus()
		if fs.Refused != "" {
			t.Fatalf("the member holding the ring was refused: %s", fs.Refused)
		}
		return len(fs.Serving) == 32 && balanced(r, names, []string{"m0"}, 2)
	})
}
