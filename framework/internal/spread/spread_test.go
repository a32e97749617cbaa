package spread_test

import (
	"context"
	"fmt"
	"os"
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
// their reconciles saw.
type referee struct {
	mu        sync.Mutex
	intervals []*interval
	seen      map[string]string // "<cluster>/<name>" -> resourceVersion reconciled last
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
		sh = sharding.Options{Ring: ring, Clusters: clusters, HandoverTimeout: 5 * time.Second,
			Lease: lease.Options{Namespace: leaseNS, Identity: id, Duration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}}
	}
	mgr := testenv.NewManager(t, plane.Config(t), framework.Options{Sharding: sh, Clusters: cluster.Options{
		Providers: []cluster.Provider{namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{"spread": label})})},
	}})
	mgr.Clusters().Subscribe(listener{r, id})
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "cms", framework.ControllerOptions{Clusters: cluster.Scope{Remote: true}}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Cluster == "" {
				return reconcile.Result{}, nil
			}
			var cm corev1.ConfigMap
			if err := cluster.From(ctx).Client().Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &cm); err != nil {
				return reconcile.Result{}, nil // deleted meanwhile
			}
			r.mu.Lock()
			r.seen[req.Cluster+"/"+req.Name] = cm.ResourceVersion
			r.mu.Unlock()
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return mgr, testenv.StartManager(t, mgr)
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
