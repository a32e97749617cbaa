package sharding_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/faultproxy"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/sharding"
	"github.com/converge-dev/converge/test/sharding/report"
)

// skew is sharding.Options.MaxClockSkew's default, which the members keep.
const skew = time.Second

// setAll sets data.v of objects 0..n-1 of ns to v, and returns the
// resourceVersions the patches produced, by name.
func setAll(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, names []string, v int) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"data":{"v":%q}}`, strconv.Itoa(v))
	for _, name := range names {
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// reconciledAt lists the objects of names whose last reconcile did not
// write v.
func notReconciledAt(ctx context.Context, cs kubernetes.Interface, ns string, names []string, v int) ([]string, error) {
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, cm := range list.Items {
		got[cm.Name] = cm.Annotations[report.ObservedAnnotation]
	}
	var out []string
	for _, name := range names {
		if got[name] != strconv.Itoa(v) {
			out = append(out, name)
		}
	}
	return out, nil
}

// waitReconciled waits until every object of names was reconciled at v.
func waitReconciled(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, names []string, v int, within time.Duration) {
	t.Helper()
	eventually(t, within, 100*time.Millisecond, func() (bool, string) {
		left, err := notReconciledAt(ctx, cs, ns, names, v)
		if err != nil {
			return false, err.Error()
		}
		if len(left) > 5 {
			left = append(left[:5], "…")
		}
		return len(left) == 0, fmt.Sprintf("objects not reconciled at v=%d: %v", v, left)
	})
}

func objectNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = objectName(i)
	}
	return out
}

// stopAll stops members with SIGTERM and waits for each.
func stopAll(t *testing.T, members ...*memberProcess) {
	t.Helper()
	for _, m := range members {
		m.signal(t, syscall.SIGTERM)
	}
	for _, m := range members {
		if err := m.wait(t); err != nil {
			t.Errorf("%s exited with %v after SIGTERM; its log:\n%s", m.identity, err, tail(m.stderr.String(), 30))
		}
	}
}

// testLayouts starts two members of one ring with different bucket counts
// together, runs times: each time exactly one layout takes the ring, the
// other member is refused (it never holds a bucket nor reconciles an
// object), every object's change is reconciled, and no key is reconciled
// by both. In the first run the refused member joins by itself once the
// other stops.
func testLayouts(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, runs int) {
	ctx := t.Context()
	ns := testenv.Namespace(t, cs, "layouts")
	const n = 64
	createObjects(ctx, t, cs, ns, n)
	names := objectNames(n)
	wins := map[string]int{}
	for run := range runs {
		ref := newReferee(t)
		flags := []string{"--ring=layouts-" + strconv.Itoa(run), "--lease=" + lease.String(), "--workers=4", "--work=10ms"}
		a := startMember(t, env.KubeconfigPath(), ns, "a", ref, append(flags, "--buckets=32")...)
		b := startMember(t, env.KubeconfigPath(), ns, "b", ref, append(flags, "--buckets=8")...)
		var winner, loser *memberProcess
		want := 0
		eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
			a.alive(t)
			b.alive(t)
			sa, _ := ref.latest("a")
			sb, _ := ref.latest("b")
			switch {
			case sa.Refused != "" && sb.Refused == "" && len(sb.Serving) == 8:
				winner, loser, want = b, a, 8
			case sb.Refused != "" && sa.Refused == "" && len(sa.Serving) == 32:
				winner, loser, want = a, b, 32
			default:
				return false, fmt.Sprintf("run %d: a serves %d buckets (refused: %q), b %d (refused: %q); want one refused, the other serving all its buckets",
					run, len(sa.Serving), sa.Refused, len(sb.Serving), sb.Refused)
			}
			return true, ""
		})
		wins[winner.identity]++
		setAll(ctx, t, cs, ns, names, run+1)
		waitReconciled(ctx, t, cs, ns, names, run+1, time.Minute)
		v := ref.judge()
		if v.overlaps != 0 {
			t.Errorf("run %d: %d reconciles of one key by both layouts at once, e.g. %v", run, v.overlaps, v.examples)
		}
		if h := ref.history(loser.identity); h.held != 0 || !h.refused {
			t.Errorf("run %d: the refused member %s held up to %d buckets (refused: %v)", run, loser.identity, h.held, h.refused)
		}
		if k := ref.reconciledBy(loser.identity); k != 0 {
			t.Errorf("run %d: the refused member %s reconciled %d times", run, loser.identity, k)
		}
		if st, _ := ref.latest(winner.identity); len(st.Serving) != want {
			t.Errorf("run %d: the winner %s serves %d buckets, want %d", run, winner.identity, len(st.Serving), want)
		}
		if run == 0 {
			// The refused member keeps trying: once the winner is gone it
			// takes the ring over.
			stopped := time.Now()
			stopAll(t, winner)
			eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
				loser.alive(t)
				st, _ := ref.latest(loser.identity)
				return st.Refused == "" && len(st.Serving) == 32+8-want, fmt.Sprintf("the refused member %s serves %d buckets (refused: %q) after the winner left", loser.identity, len(st.Serving), st.Refused)
			})
			t.Logf("run %d: %s refused while %s held the ring, then took it over %v after %s left", run, loser.identity, winner.identity, time.Since(stopped).Round(10*time.Millisecond), winner.identity)
			stopAll(t, loser)
		} else {
			stopAll(t, a, b)
		}
		t.Logf("run %d: %s's layout took the ring; %s refused; 0 overlaps over %d reconciles %v", run, winner.identity, loser.identity, v.reconciles, v.outcomes)
	}
	t.Logf("two layouts started together %d times: a (32 buckets) took the ring %d times, b (8 buckets) %d times; the other was refused every time", runs, wins["a"], wins["b"])
}

// testTwoPrograms runs a program sharding ConfigMaps and then one sharding
// Secrets on the same ring name: the second is refused, and every
// ConfigMap's change is reconciled (none falls into a bucket of the program
// without a ConfigMap controller).
func testTwoPrograms(t *testing.T, env *envtest.Environment, cs kubernetes.Interface) {
	ctx := t.Context()
	ns := testenv.Namespace(t, cs, "programs")
	const n = 40
	createObjects(ctx, t, cs, ns, n)
	for i := range n {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: objectName(i)}, StringData: map[string]string{"v": "0"}}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref := newReferee(t)
	flags := []string{"--ring=programs", "--lease=" + lease.String(), "--workers=4", "--work=10ms"}
	// The ConfigMaps program holds the ring first; which of two programs
	// started together wins is the layouts' test's.
	since := time.Now()
	cms := startMember(t, env.KubeconfigPath(), ns, "configmaps", ref, flags...)
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		counts, ok := ref.served([]string{"configmaps"}, buckets, since)
		return ok, fmt.Sprintf("the ConfigMaps program serves %v buckets", counts)
	})
	secrets := startMember(t, env.KubeconfigPath(), ns, "secrets", ref, append(flags, "--kind=secrets")...)
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		cms.alive(t)
		secrets.alive(t)
		sc, _ := ref.latest("configmaps")
		ss, _ := ref.latest("secrets")
		return ss.Refused != "" && len(sc.Serving) == buckets, fmt.Sprintf("the ConfigMaps program serves %d buckets (refused: %q), the Secrets program %d (refused: %q)",
			len(sc.Serving), sc.Refused, len(ss.Serving), ss.Refused)
	})
	st, _ := ref.latest("secrets")
	for _, want := range []string{"member (ConfigMap)", "member (Secret)", `"configmaps"`, `"secrets"`} {
		if !strings.Contains(st.Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, st.Refused)
		}
	}
	names := objectNames(n)
	setAll(ctx, t, cs, ns, names, 1)
	waitReconciled(ctx, t, cs, ns, names, 1, time.Minute)
	if h := ref.history("secrets"); h.held != 0 {
		t.Errorf("the Secrets program held up to %d buckets of the ConfigMaps program's ring", h.held)
	}
	t.Logf("two programs on one ring name: the Secrets program refused (%s); every ConfigMap reconciled by the other", st.Refused)
	stopAll(t, cms, secrets)
}

// testPartition holds every byte between member a and the API server past
// Lease.Duration, with a's reconciles of a burst of changes in flight, and
// then lets them through: b took a's buckets over meanwhile and reconciled
// the same objects, and their next change. The referee counts a's writes that landed over b's
// look at an object (by resourceVersion): none, as each of a's writes is
// conditional on the version it read; with the preconditions off
// (noPreconditions, the negative control) at least one.
func testPartition(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, noPreconditions bool) {
	ctx := t.Context()
	ns := testenv.Namespace(t, cs, "partition")
	const n = 200
	createObjects(ctx, t, cs, ns, n)
	u, err := url.Parse(env.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ref := newReferee(t)
	// a's reconciles work 300 ms before they write, so that a cut made as
	// one begins catches its write.
	flags := []string{"--ring=partition", "--lease=" + lease.String(), "--workers=4"}
	aFlags := append(slices.Clone(flags), "--work=300ms", "--server=https://"+p.Addr())
	if noPreconditions {
		aFlags = append(aFlags, "--no-preconditions")
	}
	since := time.Now()
	a := startMember(t, env.KubeconfigPath(), ns, "a", ref, aFlags...)
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		counts, ok := ref.served([]string{"a"}, buckets, since)
		return ok, fmt.Sprintf("a serves %v buckets", counts)
	})
	since = time.Now()
	b := startMember(t, env.KubeconfigPath(), ns, "b", ref, append(flags, "--work=10ms")...)
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		counts, ok := ref.served([]string{"a", "b"}, buckets, since)
		return ok, fmt.Sprintf("a and b serve %v buckets", counts)
	})
	st, _ := ref.latest("a")
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	of := sharding.Buckets{By: sharding.ByUID, Count: buckets}
	var ofA []string
	for i := range list.Items {
		if slices.Contains(st.Serving, of.OfObject(&list.Items[i])) {
			ofA = append(ofA, list.Items[i].Name)
		}
	}

	// A burst of changes to a's objects; the cut comes as a begins a
	// reconcile of one: its write leaves some 200 ms later, through the
	// fence (a renewed its buckets within RenewDeadline), into the cut.
	setAll(ctx, t, cs, ns, ofA, 1)
	eventually(t, time.Minute, 2*time.Millisecond, func() (bool, string) {
		return ref.freshOf("a", 100*time.Millisecond) > 0, "a begins a reconcile of the burst"
	})
	p.SetMode(faultproxy.Hold, 0)
	cut := time.Now()
	// a's last renewal to reach the server is on its bucket Leases now:
	// none sent later passes the cut. A member claims a Lease it saw
	// unchanged for Lease.Duration, so b may claim up to RetryPeriod
	// before cut+Lease.Duration, but never before lastRenewal+Lease.Duration.
	lastRenewal := lastRenewalOf(ctx, t, cs, ns, "partition-bucket-", "a")
	// b takes a's buckets over, after Lease.Duration, and reconciles a's
	// objects at their new version.
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		sb, _ := ref.latest("b")
		if len(sb.Serving) != buckets {
			return false, fmt.Sprintf("b serves %d buckets while a is cut off", len(sb.Serving))
		}
		left, err := notReconciledAt(ctx, cs, ns, ofA, 1)
		return err == nil && len(left) == 0, fmt.Sprintf("%d of a's objects not reconciled at v=1 by b (%v)", len(left), err)
	})
	held := time.Since(cut)
	if since := time.Since(lastRenewal); since < lease {
		t.Fatalf("b served a's buckets %v after a's last renewal (%v before the cut), within LeaseDuration (%v)", since, cut.Sub(lastRenewal), lease)
	}
	// The objects change again and b reconciles them: a's held writes,
	// of the older value, would now undo b's (a write of the value b
	// already wrote changes nothing, and the server gives it no new
	// resourceVersion).
	setAll(ctx, t, cs, ns, ofA, 2)
	waitReconciled(ctx, t, cs, ns, ofA, 2, time.Minute)
	held = time.Since(cut)
	before := ref.outcomesOf("a")
	p.SetMode(faultproxy.Pass, 0)
	// What a sent before and during the cut arrives now; its reconciles
	// then end.
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		a.alive(t)
		return ref.openOf("a") == 0, fmt.Sprintf("a has %d reconciles in flight after the partition healed", ref.openOf("a"))
	})
	after := ref.outcomesOf("a")
	late := map[string]int{}
	for o, k := range after {
		if d := k - before[o]; d > 0 {
			late[o] = d
		}
	}
	v := ref.judge()
	what := "preconditions on"
	if noPreconditions {
		what = "preconditions off (negative control)"
	}
	t.Logf("partition (%s): a's bytes held %v (LeaseDuration %v); a's reconciles that ended once they were let through: %v; writes that landed over another member's later look: %d %v",
		what, held.Round(10*time.Millisecond), lease, late, v.stale, v.staleExamples)
	switch {
	case noPreconditions && v.stale == 0:
		t.Errorf("with the preconditions off, no write of a landed over b's: the partition let no late write through, and the test cannot tell (a's late reconciles: %v)", late)
	case !noPreconditions && v.stale != 0:
		t.Errorf("%d writes landed over another member's later look at the object, e.g. %v", v.stale, v.staleExamples)
	}
	stopAll(t, a, b)
}

// testRestartAfterACrash starts a member once a crashed member's Leases
// have expired (by the time they carry): it must neither count the
// crashed member as live nor wait Lease.Duration for its buckets. First a
// ring of a and b loses b (SIGKILL) and c joins; then a and c crash and d
// starts alone. It prints the time until every bucket is served.
func testRestartAfterACrash(t *testing.T, env *envtest.Environment, cs kubernetes.Interface) {
	ctx := t.Context()
	ns := testenv.Namespace(t, cs, "restart")
	const n = 300
	createObjects(ctx, t, cs, ns, n)
	ref := newReferee(t)
	flags := []string{"--ring=restart", "--lease=" + lease.String(), "--workers=4", "--work=10ms"}
	start := func(id string) *memberProcess { return startMember(t, env.KubeconfigPath(), ns, id, ref, flags...) }
	settle := func(what string, since time.Time, live ...string) time.Duration {
		t.Helper()
		eventually(t, 2*time.Minute, 20*time.Millisecond, func() (bool, string) {
			counts, ok := ref.served(live, buckets, since)
			return ok, fmt.Sprintf("%s: members %v serve %v buckets", what, live, counts)
		})
		return time.Since(since)
	}
	crash := func(ms ...*memberProcess) time.Time {
		at := time.Now()
		for _, m := range ms {
			m.signal(t, syscall.SIGKILL)
			_ = m.wait(t)
			ref.killed(m.cmd.Process.Pid, at)
		}
		return at
	}
	// expired waits until Leases last renewed before at expired, by the
	// time they carry: Lease.Duration and MaxClockSkew after it, and a
	// RetryPeriod for the last renewal's lead.
	expired := func(at time.Time) {
		eventually(t, time.Minute, 50*time.Millisecond, func() (bool, string) {
			return time.Since(at) > lease+skew+lease/8, "the crashed members' Leases expire"
		})
	}
	a, b := start("a"), start("b")
	settle("a and b", time.Now(), "a", "b")
	killed := crash(b)
	settle("a alone", killed, "a")
	expired(killed)
	since := time.Now()
	c := start("c")
	joined := settle("c joins a, b crashed", since, "a", "c")

	killed = crash(a, c)
	expired(killed)
	since = time.Now()
	d := start("d")
	alone := settle("d starts alone, a and c crashed", since, "d")
	t.Logf("restart after a crash (LeaseDuration %v, RetryPeriod %v): c joining a after b crashed: every bucket served after %v; d starting after a and c crashed: after %v",
		lease, lease/8, joined.Round(10*time.Millisecond), alone.Round(10*time.Millisecond))
	for m, dead := range map[string][]string{"c": {"b"}, "d": {"a", "c"}} {
		for _, x := range dead {
			if ref.history(m).members[x] {
				t.Errorf("%s counted %s, which had crashed before %s started, as a live member", m, x, m)
			}
		}
	}
	for what, took := range map[string]time.Duration{"c joining": joined, "d starting alone": alone} {
		if took >= lease {
			t.Errorf("%s: every bucket served after %v, not within LeaseDuration (%v): the crashed members' Leases held it up", what, took, lease)
		}
	}
	stopAll(t, d)
}

// testSteadyCost measures what the preconditions cost at steady state: a
// ring of two members reconciles objects changing at rate per second for
// d, once with preconditions and once without, and it prints, per 1,000
// changes, the writes refused with a Conflict (the object changed again
// between the reconcile's read and its write) and the reconciles made.
func testSteadyCost(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, objects int, rate float64, d time.Duration) {
	for _, noPreconditions := range []bool{false, true} {
		name := "with preconditions"
		if noPreconditions {
			name = "without preconditions"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ns := testenv.Namespace(t, cs, "cost")
			createObjects(ctx, t, cs, ns, objects)
			ref := newReferee(t)
			flags := []string{"--ring=cost", "--lease=" + lease.String(), "--workers=4", "--work=10ms"}
			if noPreconditions {
				flags = append(flags, "--no-preconditions")
			}
			since := time.Now()
			m1 := startMember(t, env.KubeconfigPath(), ns, "m1", ref, flags...)
			m2 := startMember(t, env.KubeconfigPath(), ns, "m2", ref, flags...)
			eventually(t, 2*time.Minute, 20*time.Millisecond, func() (bool, string) {
				counts, ok := ref.served([]string{"m1", "m2"}, buckets, since)
				return ok, fmt.Sprintf("m1 and m2 serve %v buckets", counts)
			})
			before := ref.judge().outcomes
			u := startUpdater(ctx, t, cs, ns, objects, rate)
			began := time.Now()
			eventually(t, 2*d, 100*time.Millisecond, func() (bool, string) { return time.Since(began) > d, "the updater runs" })
			u.stop()
			eventually(t, 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
				left, err := u.unreconciled(ctx, cs, ns)
				return err == nil && len(left) == 0, fmt.Sprintf("%d objects' last change not reconciled (%v)", len(left), err)
			})
			v := ref.judge()
			u.mu.Lock()
			changes := u.changes
			u.mu.Unlock()
			per := func(outcome string) float64 {
				return float64(v.outcomes[outcome]-before[outcome]) * 1000 / float64(changes)
			}
			reconciles := 0
			for o, k := range v.outcomes {
				reconciles += k - before[o]
			}
			t.Logf("steady state %s: %d changes in %v (at most %.0f/s) over %d objects, 2 members: per 1,000 changes %.1f writes refused with a Conflict, %.1f written, %.1f reconciles in all; %d writes landed over another member's later look",
				name, changes, d, rate, objects, per(report.Conflict), per(report.Written), float64(reconciles)*1000/float64(changes), v.stale)
			stopAll(t, m1, m2)
		})
	}
}

// lastRenewalOf is the latest renewal time, on the holder's clock, of
// the Leases in ns whose name starts with prefix and that holder holds.
func lastRenewalOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, prefix, holder string) time.Time {
	t.Helper()
	leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, l := range leases.Items {
		if !strings.HasPrefix(l.Name, prefix) || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder || l.Spec.RenewTime == nil {
			continue
		}
		if r := l.Spec.RenewTime.Time; r.After(last) {
			last = r
		}
	}
	if last.IsZero() {
		t.Fatalf("no Lease %s* in %s held by %s", prefix, ns, holder)
	}
	return last
}
