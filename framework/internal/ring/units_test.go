package ring

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// The assignment of buckets, and what a ring without clusters records on
// its Leases, are those of the rings before clusters could be spread:
// testdata holds them as they were.
func TestBucketsAreAssignedAndRecordedAsBefore(t *testing.T) {
	want, err := os.ReadFile("testdata/assign.golden")
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, n := range []int{1, 2, 3, 5} {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("member-%d", i)
		}
		for _, buckets := range []int{32, 4096} {
			owners := strings.Join(Assign(buckets, members), " ")
			if buckets == 32 {
				fmt.Fprintf(&got, "%d members, %d buckets: %s\n", n, buckets, owners)
			} else {
				fmt.Fprintf(&got, "%d members, %d buckets: sha256 %x\n", n, buckets, sha256.Sum256([]byte(owners)))
			}
		}
	}
	if got.String() != string(want) {
		t.Errorf("Assign changed:\n%s\nwant (testdata/assign.golden):\n%s", got.String(), want)
	}

	want, err = os.ReadFile("testdata/layout.golden")
	if err != nil {
		t.Fatal(err)
	}
	lay := Layout{Cut: "32/uid", Controllers: "cms (ConfigMap), web (Deployment.apps)"}
	var l coordinationv1.Lease
	lay.Annotate(&l)
	if g := fmt.Sprintf("%s=%s\n%s=%s\nstring=%s\n", LayoutAnno, l.Annotations[LayoutAnno], ControllersAnno, l.Annotations[ControllersAnno], lay); g != string(want) {
		t.Errorf("a layout without clusters is recorded as\n%s\nwant (testdata/layout.golden):\n%s", g, want)
	}
	if back := LayoutOf(&l); back != lay {
		t.Errorf("LayoutOf(Annotate(%+v)) = %+v", lay, back)
	}
	r := &Ring{opts: sharding.Options{Lease: lease.Options{Identity: "me"}}, layout: lay}
	if p := string(r.layoutPatch(time.Now())); !strings.Contains(p, `"value":"cms (ConfigMap), web (Deployment.apps)"}`) {
		t.Errorf("the layout Lease's patch tests %s, want the controllers alone", p)
	}
}

// A layout that spreads clusters records how they are found next to the
// controllers, so that a member that finds them otherwise differs.
func TestLayoutRecordsHowClustersAreFound(t *testing.T) {
	a := Layout{Cut: "32/uid", Controllers: "cms (ConfigMap)", Units: "clusters of namespaces(labels: spread=a)"}
	var l coordinationv1.Lease
	a.Annotate(&l)
	if got := l.Annotations[ControllersAnno]; got != "cms (ConfigMap) | clusters of namespaces(labels: spread=a)" {
		t.Errorf("ControllersAnno = %q", got)
	}
	if back := LayoutOf(&l); back != a {
		t.Errorf("LayoutOf(Annotate(%+v)) = %+v", a, back)
	}
	b := a
	b.Units = "clusters of namespaces(labels: spread=b)"
	if a == b || !strings.Contains(a.String(), "clusters of namespaces(labels: spread=a)") {
		t.Errorf("layouts %v and %v: want them to differ, each naming its providers", a, b)
	}
	if none := (Layout{Cut: "32/uid", Controllers: "cms (ConfigMap)"}); none == a {
		t.Errorf("a layout spreading clusters equals one that does not")
	}
}

func clusterNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("edge-%d", i)
	}
	return names
}

func TestAssignClustersIsBalancedAndStable(t *testing.T) {
	for _, m := range []int{1, 2, 3, 5} {
		members := clusterNames(m) // any sorted names will do
		for i := range members {
			members[i] = "member-" + members[i]
		}
		for _, c := range []int{0, 1, 7, 12, 100} {
			owners := AssignClusters(clusterNames(c), members)
			load := map[string]int{}
			for _, o := range owners {
				load[o]++
			}
			lo, hi := c/m, (c+m-1)/m
			for _, mem := range members {
				if load[mem] < lo || load[mem] > hi {
					t.Errorf("%d clusters over %d members: %s owns %d, want %d to %d", c, m, mem, load[mem], lo, hi)
				}
			}
		}
	}
	// One more cluster moves, besides itself, about one other: rendezvous
	// hashing keeps most in place, and keeping loads within one of each
	// other moves a few.
	for _, members := range [][]string{{"a", "b", "c"}, {"a", "b", "c", "d", "e"}} {
		moved, worst := 0, 0
		for c := 1; c < 200; c++ {
			before, after := AssignClusters(clusterNames(c), members), AssignClusters(clusterNames(c+1), members)
			n := 0
			for i := range before {
				if before[i] != after[i] {
					n++
				}
			}
			moved, worst = moved+n, max(worst, n)
		}
		if mean := float64(moved) / 199; mean > 1.5 || worst > len(members)+2 {
			t.Errorf("%d members: adding a cluster moved %.2f others on average, %d at worst; want at most 1.5 and %d", len(members), mean, worst, len(members)+2)
		}
	}
	// A joining member takes its share, and fewer move between the others.
	names := clusterNames(30)
	before, after := AssignClusters(names, []string{"a", "b", "c"}), AssignClusters(names, []string{"a", "b", "c", "d"})
	toNew, between := 0, 0
	for i := range before {
		switch {
		case before[i] == after[i]:
		case after[i] == "d":
			toNew++
		default:
			between++
		}
	}
	if toNew < 7 || toNew > 8 || 2*between > toNew {
		t.Errorf("a fourth member joining moved %d clusters to it and %d between the others; want 7 or 8, and at most half as many between", toNew, between)
	}
}

// randomLabel is a random DNS-1123 label of 1 to max characters.
func randomLabel(rnd *rand.Rand, max int) string {
	const alnum, inner = "abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 1+rnd.IntN(max))
	for i := range b {
		set := inner
		if i == 0 || i == len(b)-1 {
			set = alnum
		}
		b[i] = set[rnd.IntN(len(set))]
	}
	return string(b)
}

// A cluster's Lease never takes the name of another Lease of any ring.
func TestClusterLeaseNamesCollideWithNoOtherLease(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		ring, other, c := randomLabel(rnd, 40), randomLabel(rnd, 40), randomLabel(rnd, 63)
		name := ClusterLeaseName(ring, c)
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Fatalf("ClusterLeaseName(%q, %q) = %q: %v", ring, c, name, msgs)
		}
		for _, taken := range []string{BucketLeaseName(other, rnd.IntN(4096)), MemberLeaseName(other, c), LayoutLeaseName(other),
			BucketLeaseName(ring, rnd.IntN(4096)), MemberLeaseName(ring, c), LayoutLeaseName(ring)} {
			if name == taken {
				t.Fatalf("cluster %q of ring %q has the Lease name %q of another Lease", c, ring, name)
			}
		}
		if o := randomLabel(rnd, 63); o != c && ClusterLeaseName(ring, o) == name {
			t.Fatalf("clusters %q and %q of ring %q share Lease %q", c, o, ring, name)
		}
	}
	// The dash form would collide: ring "a", cluster "bucket-3" against
	// ring "a-c"'s bucket 3.
	if ClusterLeaseName("a", "bucket-3") == BucketLeaseName("a-c", 3) {
		t.Errorf("cluster bucket-3 of ring a collides with bucket 3 of ring a-c")
	}
}

// stubClusters is a ClusterUser that records, per cluster, the holdings
// the ring gave it: from Acquire to Drop.
type stubClusters struct {
	id       string
	log      *holdLog
	mu       sync.Mutex
	view     []string
	engaged  map[string]context.Context
	acquired []string
	dropped  []string
}

func (s *stubClusters) set(view ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.view = view
}

func (s *stubClusters) Clusters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.view)
}

func (s *stubClusters) Acquire(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engaged == nil {
		s.engaged = map[string]context.Context{}
	}
	s.engaged[name] = ctx
	s.acquired = append(s.acquired, name)
	s.log.note(s.id, name, true)
	return nil
}

func (s *stubClusters) Serve(context.Context, string, bool)  {}
func (s *stubClusters) Drain(string, time.Duration) []string { return nil }

func (s *stubClusters) Drop(ctx context.Context, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engaged[name] == ctx {
		delete(s.engaged, name)
		s.dropped = append(s.dropped, name)
		s.log.note(s.id, name, false)
	}
}

func (s *stubClusters) Describe() string { return "stub" }

func (s *stubClusters) holding(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engaged[name] != nil
}

// eventually polls cond until it holds, or fails after 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startSpreading starts a ring of one member on a fake API server that
// spreads u's clusters, until the test ends; it returns the ring and a
// client of its Leases.
func startSpreading(t *testing.T, u ClusterUser) (*Ring, coordclient.LeaseInterface) {
	t.Helper()
	cs, err := coordclient.NewForConfig(fake.Start(t, fake.Options{}).Config())
	if err != nil {
		t.Fatal(err)
	}
	return startMember(t, cs, "me", u), cs.Leases("ns")
}

// startMember starts member id of ring "r" on cs, spreading u's clusters,
// until the test ends.
func startMember(t *testing.T, cs coordclient.LeasesGetter, id string, u ClusterUser) *Ring {
	t.Helper()
	opts := sharding.Options{
		Ring: "r", Buckets: sharding.Buckets{Count: 2, By: sharding.ByUID}, FormationDelay: -1, HandoverTimeout: time.Second,
		Lease: lease.Options{Namespace: "ns", Identity: id, Duration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond},
	}
	r := New(cs, opts, logr.Discard(), NewMetrics(opts.Ring))
	if err := r.SpreadClusters(u); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// The fence of a cluster is closed while the ring does not hold it, once
// it was handed over, and once it went unrenewed for RenewDeadline; a
// cluster the providers no longer find is disengaged and its Lease
// released.
func TestClusterFence(t *testing.T) {
	u := &stubClusters{}
	u.set("edge-1", "edge-2")
	r, leases := startSpreading(t, u)
	if err := r.CheckCluster("edge-3"); !errors.Is(err, sharding.ErrClusterNotHeld) || !strings.Contains(err.Error(), "cluster edge-3 of ring ns/r") {
		t.Errorf("fence of a cluster never held = %v, want sharding.ErrClusterNotHeld naming it", err)
	}
	eventually(t, "both clusters are engaged", func() bool { return u.holding("edge-1") && u.holding("edge-2") })
	eventually(t, "edge-1's fence opens", func() bool { return r.CheckCluster("edge-1") == nil })
	l, err := leases.Get(t.Context(), "r.c.edge-1", metav1.GetOptions{})
	if err != nil || Holder(l) != "me" || l.Labels[ClusterLabel] != "edge-1" || l.Labels[RoleLabel] != RoleCluster {
		t.Fatalf("Lease r.c.edge-1 = %v, %v; want held by me, labelled as edge-1's", l, err)
	}
	if s := r.Status().Clusters; s == nil || s.Seen != 2 {
		t.Errorf("Status.Clusters = %+v, want 2 seen", s)
	}
	eventually(t, "converge_shard_clusters counts both as serving", func() bool {
		return testutil.ToFloat64(r.metrics.Clusters.WithLabelValues("r", "serving")) == 2
	})
	if n := testutil.ToFloat64(r.metrics.Buckets.WithLabelValues("r", "serving")); n > 2 {
		t.Errorf("converge_shard_buckets counts %v serving, more than the ring's 2 buckets: clusters counted as buckets", n)
	}

	// Unrenewed for RenewDeadline: fenced, and the member is not ready.
	r.mu.Lock()
	r.held[clusterUnit("edge-1")].renewed = time.Now().Add(-time.Hour)
	r.mu.Unlock()
	if err := r.CheckCluster("edge-1"); !errors.Is(err, sharding.ErrClusterNotHeld) || !strings.Contains(err.Error(), "last renewed") {
		t.Errorf("fence of a cluster renewed an hour ago = %v, want sharding.ErrClusterNotHeld", err)
	}

	// edge-2 is no longer found: handed over at once, to nobody.
	u.set("edge-1")
	r.Poke()
	eventually(t, "edge-2 is dropped", func() bool { return !u.holding("edge-2") })
	if err := r.CheckCluster("edge-2"); !errors.Is(err, sharding.ErrClusterNotHeld) {
		t.Errorf("fence of a cluster handed over = %v, want sharding.ErrClusterNotHeld", err)
	}
	eventually(t, "edge-2's Lease is released or deleted", func() bool {
		l, err := leases.Get(t.Context(), "r.c.edge-2", metav1.GetOptions{})
		return err != nil || Holder(l) == ""
	})
}

// holdLog records, across members, when each held each cluster, and
// counts the times a member began to hold a cluster another held.
type holdLog struct {
	mu      sync.Mutex
	holders map[string]map[string]bool // cluster -> members holding it
	doubles []string
}

func (l *holdLog) note(member, cluster string, on bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders == nil {
		l.holders = map[string]map[string]bool{}
	}
	if l.holders[cluster] == nil {
		l.holders[cluster] = map[string]bool{}
	}
	if on && len(l.holders[cluster]) > 0 {
		l.doubles = append(l.doubles, fmt.Sprintf("%s by %s while held by %v", cluster, member, l.holders[cluster]))
	}
	if on {
		l.holders[cluster][member] = true
	} else {
		delete(l.holders[cluster], member)
	}
}

// holder returns the one member holding cluster, "" for none or several.
func (l *holdLog) holder(cluster string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.holders[cluster]) != 1 {
		return ""
	}
	for m := range l.holders[cluster] {
		return m
	}
	return ""
}

// Members whose providers found different clusters: the one that found
// a cluster the other did not adopts it once its Lease stayed free for
// Lease.Duration, no cluster is held twice, and once both found the same
// clusters they are spread as the assignment says.
func TestMembersWithDifferentViewsNeverHoldAClusterTwice(t *testing.T) {
	cs, err := coordclient.NewForConfig(fake.Start(t, fake.Options{}).Config())
	if err != nil {
		t.Fatal(err)
	}
	log := &holdLog{}
	a, b := &stubClusters{id: "a", log: log}, &stubClusters{id: "b", log: log}
	a.set("x", "y", "z")
	b.set("x", "y")
	rb := startMember(t, cs, "b", b)
	eventually(t, "b, alone, holds x and y", func() bool { return log.holder("x") == "b" && log.holder("y") == "b" })
	ra := startMember(t, cs, "a", a)
	eventually(t, "a and b see each other", func() bool { return len(ra.Status().Members) == 2 && len(rb.Status().Members) == 2 })
	// z's owner over a and b is b, which did not find it: a adopts it
	// once its Lease stayed free for Lease.Duration.
	owners := AssignClusters([]string{"x", "y", "z"}, []string{"a", "b"})
	if owners[2] != "b" {
		t.Fatalf("the assignment gives z to %q; this test wants b, which does not find it", owners[2])
	}
	eventually(t, "a adopts z", func() bool { return log.holder("z") == "a" })
	if s := ra.Status().Clusters; s == nil || !slices.Equal(s.Disagree, []string{"b"}) {
		t.Errorf("a's Status.Clusters = %+v, want b named as disagreeing", s)
	}
	// While the views disagree, b keeps x and y, whatever the assignment.
	if log.holder("x") != "b" || log.holder("y") != "b" {
		t.Errorf("x and y moved while the views disagree: held by %q and %q", log.holder("x"), log.holder("y"))
	}
	b.set("x", "y", "z")
	rb.Poke()
	eventually(t, "the clusters are held as the assignment over a and b says", func() bool {
		return log.holder("x") == owners[0] && log.holder("y") == owners[1] && log.holder("z") == owners[2]
	})
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.doubles) > 0 {
		t.Errorf("clusters held twice: %q", log.doubles)
	}
}

// A ring that spreads clusters and has no sharded controller claims no
// bucket: no bucket Lease, none held, and a layout that says so.
func TestClustersAloneClaimNoBucket(t *testing.T) {
	u := &stubClusters{}
	u.set("edge-1")
	r, leases := startSpreading(t, u)
	eventually(t, "the cluster is engaged", func() bool { return u.holding("edge-1") })
	l, err := leases.List(t.Context(), metav1.ListOptions{LabelSelector: RoleLabel + "=" + RoleBucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) > 0 {
		t.Errorf("the ring made %d bucket Leases, want none", len(l.Items))
	}
	if s := r.Status(); s.Buckets.Count != 0 || len(s.Serving)+len(s.Syncing) > 0 {
		t.Errorf("Status = buckets %+v, serving %v, syncing %v; want none", s.Buckets, s.Serving, s.Syncing)
	}
	if got, want := r.Layout().String(), "no buckets (no sharded controllers), clusters of stub; own cluster by every member"; got != want {
		t.Errorf("layout %q, want %q", got, want)
	}
}

// A cluster Lease is free once released, or once it expired: a crashed
// member's cluster is orphaned (claimed by a member it is not assigned
// to) only once it stayed free for Lease.Duration after it expired. At
// its expiry only its owner under the assignment claims it, so a crash
// moves each cluster once rather than to whichever member claims first
// and then on to its owner.
func TestAClusterIsOrphanedLeaseDurationAfterItBecameFree(t *testing.T) {
	cs, err := coordclient.NewForConfig(fake.Start(t, fake.Options{}).Config())
	if err != nil {
		t.Fatal(err)
	}
	d := 2 * time.Second
	opts := sharding.Options{Ring: "r", Buckets: sharding.Buckets{Count: 2, By: sharding.ByUID}, FormationDelay: -1,
		Lease: lease.Options{Namespace: "ns", Identity: "me", Duration: d, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}}
	members := []string{"me", "other"}
	// x is a cluster the assignment over members gives to the other.
	var x string
	for _, c := range clusterNames(20) {
		if AssignClusters([]string{c}, members)[0] == "other" {
			x = c
			break
		}
	}
	if x == "" {
		t.Fatal("the assignment gives each of 20 clusters to me")
	}
	for _, tc := range []struct {
		name    string
		holder  string
		changed time.Duration // how long ago the Lease last changed
		want    string        // why it is claimed here, "" for not
	}{
		{"held by a live member", "gone", d / 2, ""},
		{"expired just now", "gone", d, ""},
		{"expired for less than Lease.Duration", "gone", d + d/2, ""},
		{"expired for Lease.Duration", "gone", 2 * d, "orphaned (expired)"},
		{"released just now", "", 0, ""},
		{"released Lease.Duration ago", "", d, "orphaned (released)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(cs, opts, logr.Discard(), NewMetrics(opts.Ring))
			u := &stubClusters{}
			u.set(x)
			if err := r.SpreadClusters(u); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: ClusterLeaseName("r", x), Namespace: "ns", ResourceVersion: "7",
					Labels: map[string]string{RingLabel: "r", RoleLabel: RoleCluster, ClusterLabel: x}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &tc.holder},
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[l.Name] = observation{rv: "7", since: now.Add(-tc.changed), at: now.Add(-tc.changed)}
			claims := r.rebalanceClustersLocked(t.Context(), map[string]*coordinationv1.Lease{l.Name: l}, members, []string{x}, true, now)
			var got string
			if len(claims) > 0 {
				got = claims[0].why
			}
			if got != tc.want {
				t.Errorf("cluster %s, assigned to another member, Lease held by %q and changed %v ago (Lease.Duration %v): claimed %q, want %q", x, tc.holder, tc.changed, d, got, tc.want)
			}
		})
	}
}
