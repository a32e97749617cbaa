package sharding_test

import (
	"context"
	"fmt"
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
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/test/sharding/report"
)

// spreadScale sizes the scenarios of clusters spread over a ring
// (sharding.Options.Clusters), each cluster a namespace of the one plane.
type spreadScale struct {
	clusters int
	rate     float64 // source changes per second, over all clusters
	// runs is how many times the membership changes run: three members
	// start together and one is SIGKILLed; with full, a fourth joins and
	// one leaves on SIGTERM before the kill, and one is frozen past its
	// Lease (SIGSTOP) and thawed after it.
	runs int
	full bool
	// configRuns is how many times two members of other provider
	// configurations start together.
	configRuns int
}

// spreadLabel returns a label value no earlier run used: the namespaces
// labelled with it outlive their test while they terminate.
func spreadLabel(prefix string) string {
	return fmt.Sprintf("%s-%06x", prefix, time.Now().UnixNano()&0xffffff)
}

// makeClusters makes n namespaces labelled report.ClusterLabel=label, each
// with its source and its copy at "0", and returns their names.
func makeClusters(t *testing.T, cs kubernetes.Interface, label string, n int) []string {
	t.Helper()
	ctx := t.Context()
	var names []string
	for i := range n {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%02d", label, i), Labels: map[string]string{report.ClusterLabel: label}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns.Name, metav1.DeleteOptions{})
		})
		for _, cm := range []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Name: report.Source}, Data: map[string]string{"v": "0"}},
			{ObjectMeta: metav1.ObjectMeta{Name: report.Copy, Annotations: map[string]string{report.ObservedAnnotation: "0"}}, Data: map[string]string{"v": "0"}},
		} {
			if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, ns.Name)
	}
	return names
}

// copiesBelow lists the clusters whose copy was not yet written for a
// value of at least want[i] (by their ObservedAnnotation).
func copiesBelow(ctx context.Context, cs kubernetes.Interface, clusters []string, want []int) ([]string, error) {
	var out []string
	for i, c := range clusters {
		cm, err := cs.CoreV1().ConfigMaps(c).Get(ctx, report.Copy, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if got, _ := strconv.Atoi(cm.Annotations[report.ObservedAnnotation]); got < want[i] || cm.Data["v"] != cm.Annotations[report.ObservedAnnotation] {
			out = append(out, fmt.Sprintf("%s (copied %q, data %q, want %d)", c, cm.Annotations[report.ObservedAnnotation], cm.Data["v"], want[i]))
		}
	}
	return out, nil
}

// waitCopied waits until every cluster's copy holds at least want[i].
func waitCopied(ctx context.Context, t *testing.T, cs kubernetes.Interface, clusters []string, want []int) {
	t.Helper()
	eventually(t, 2*time.Minute, 100*time.Millisecond, func() (bool, string) {
		left, err := copiesBelow(ctx, cs, clusters, want)
		if err != nil {
			return false, err.Error()
		}
		if len(left) > 5 {
			left = append(left[:5], "…")
		}
		return len(left) == 0, fmt.Sprintf("copies behind their source: %v", left)
	})
}

// lastValues returns u's last value of each object.
func (u *updater) lastValues() []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.last)
}

// testSpread runs the membership changes of a ring spreading clusters,
// ss.runs times, under a stream of source changes.
func testSpread(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, ss spreadScale) {
	for run := range ss.runs {
		t.Run(fmt.Sprintf("run %d", run+1), func(t *testing.T) { newChain(t, env, cs, ss).run() })
	}
}

// spreadStep is a step of a chain: moved counts the clusters whose holder
// changed, begun the engagements that began until it settled (one per
// cluster moved when each moves once, straight to its holder).
type spreadStep struct {
	step
	moved, begun int
}

// chain is one run of testSpread.
type chain struct {
	t        *testing.T
	env      *envtest.Environment
	cs       kubernetes.Interface
	ss       spreadScale
	ref      *referee
	leases   string
	clusters []string
	flags    []string
	members  map[string]*memberProcess
	u        *updater
	steps    []spreadStep
	// holders are the clusters' holders when the last step settled.
	holders map[string][]string
	// late is what the reconciles the frozen member had in flight when it
	// was stopped did once it was thawed, by outcome.
	late map[string]int
}

func newChain(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, ss spreadScale) *chain {
	label := spreadLabel("fleet")
	c := &chain{t: t, env: env, cs: cs, ss: ss, ref: newReferee(t), leases: testenv.Namespace(t, cs, "leases"),
		clusters: makeClusters(t, cs, label, ss.clusters), members: map[string]*memberProcess{}}
	// Reconciles that write work 200 ms first, so that a member frozen
	// as one begins holds a write past its Lease.
	c.flags = []string{"--ring=fleet", "--lease=" + lease.String(), "--workers=4", "--work=200ms", "--clusters=" + label}
	return c
}

func (c *chain) start(ids ...string) {
	for _, id := range ids {
		c.members[id] = startMember(c.t, c.env.KubeconfigPath(), c.leases, id, c.ref, c.flags...)
	}
}

// settle waits until each cluster is engaged by exactly one of live, the
// counts within one of each other, records the step, and waits until
// every change made so far is copied.
func (c *chain) settle(change, target string, since time.Time, live ...string) {
	c.t.Helper()
	var counts []int
	eventually(c.t, 2*time.Minute, 20*time.Millisecond, func() (bool, string) {
		for _, id := range live {
			c.members[id].alive(c.t)
		}
		var ok bool
		counts, ok = c.ref.spread(live, c.clusters)
		return ok, fmt.Sprintf("%s: %v engage %v of the %d clusters, want each once and within one of even (engaged now: %v)", change, live, counts, len(c.clusters), c.ref.holders())
	})
	s := step{change: change, target: target, members: len(live), at: since, took: time.Since(since)}
	var share []string
	for i, id := range live {
		share = append(share, fmt.Sprintf("%s %d", id, counts[i]))
	}
	s.share = strings.Join(share, ", ")
	now := c.ref.holders()
	moved := 0
	for _, x := range c.clusters {
		if !slices.Equal(now[x], c.holders[x]) {
			moved++
		}
	}
	c.holders = now
	c.steps = append(c.steps, spreadStep{step: s, moved: moved, begun: c.ref.begun(since, since.Add(s.took))})
	c.t.Logf("%s: every cluster engaged once after %v (%s)", change, s.took.Round(time.Millisecond), s.share)
	// The changes made so far are copied before the next step: each
	// step's figures are its own.
	waitCopied(c.t.Context(), c.t, c.cs, c.clusters, c.u.lastValues())
}

func (c *chain) run() {
	t, ctx := c.t, c.t.Context()
	c.u = startUpdaterOf(ctx, t, c.cs, len(c.clusters), c.ss.rate, func(i int) (string, string, string) {
		return c.clusters[i], report.Source, c.clusters[i]
	})
	even := "each once, within one of even"
	since := time.Now()
	c.start("m1", "m2", "m3")
	c.settle("start together: 3 members", even, since, "m1", "m2", "m3")
	live := []string{"m1", "m3"}
	if c.ss.full {
		since = time.Now()
		c.start("m4")
		c.settle("join: 4 members", even+", handed over", since, "m1", "m2", "m3", "m4")
		since = time.Now()
		c.members["m1"].signal(t, syscall.SIGTERM)
		c.settle("SIGTERM m1: 3 left", "handed over", since, "m2", "m3", "m4")
		if err := c.members["m1"].wait(t); err != nil {
			t.Errorf("m1 exited with %v after SIGTERM; its log:\n%s", err, tail(c.members["m1"].stderr.String(), 30))
		}
		live = []string{"m3", "m4"}
	}
	since = time.Now()
	c.members["m2"].signal(t, syscall.SIGKILL)
	_ = c.members["m2"].wait(t)
	c.ref.killed(c.members["m2"].cmd.Process.Pid, since)
	c.settle("SIGKILL m2: "+strconv.Itoa(len(live))+" left", fmt.Sprintf("engaged elsewhere (bound: LeaseDuration %v + sync)", lease), since, live...)
	if c.ss.full {
		c.freeze("m3", "m4")
	}
	c.u.stop()
	stopped := time.Now()
	waitCopied(ctx, t, c.cs, c.clusters, c.u.lastValues())
	converged := time.Since(stopped)
	var ms []*memberProcess
	for _, id := range live {
		ms = append(ms, c.members[id])
	}
	stopAll(t, ms...)
	c.judge(converged)
}

// freeze stops member frozen (SIGSTOP) as one of its reconciles begins,
// until successor engages every cluster and copies every source anew,
// then thaws it (SIGCONT): the write it held must not land over the
// successor's.
func (c *chain) freeze(frozen, successor string) {
	t, ctx := c.t, c.t.Context()
	m := c.members[frozen]
	eventually(t, time.Minute, 2*time.Millisecond, func() (bool, string) {
		return c.ref.freshOf(frozen, 100*time.Millisecond) > 0, frozen + " begins a reconcile"
	})
	since := time.Now()
	m.signal(t, syscall.SIGSTOP)
	c.ref.froze(m.cmd.Process.Pid, since)
	held := c.ref.openSpans(frozen)
	c.settle(fmt.Sprintf("SIGSTOP %s past its Lease: %s alone", frozen, successor), fmt.Sprintf("engaged elsewhere (bound: LeaseDuration %v + sync)", lease), since, successor)
	c.u.changeAll(ctx)
	waitCopied(ctx, t, c.cs, c.clusters, c.u.lastValues())
	since = time.Now()
	m.signal(t, syscall.SIGCONT)
	c.ref.thawed(m.cmd.Process.Pid, since)
	c.settle(fmt.Sprintf("SIGCONT %s: 2 members", frozen), "handed back", since, frozen, successor)
	eventually(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
		return c.ref.openOf(frozen) == 0, fmt.Sprintf("%s has %d reconciles in flight after it was thawed", frozen, c.ref.openOf(frozen))
	})
	c.late = c.ref.outcomesOfSpans(held)
}

// judge prints the run's table and fails t on a double engagement, a
// reconcile of one cluster by two members at once with both writes
// accepted, a write that landed over another member's later look, or a
// change not copied.
func (c *chain) judge(converged time.Duration) {
	t := c.t
	v, e := c.ref.judge(), c.ref.judgeEngagements()
	c.u.mu.Lock()
	changes, failures := c.u.changes, c.u.failures
	done := c.ref.reconciledAt()
	for i, s := range c.steps {
		c.steps[i].slowest = slowest(c.u.log, done, s.at, s.at.Add(s.took))
	}
	c.u.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\nspread clusters: %d clusters (namespaces), %d source changes at %.0f/s (%d failed), %d reconciles %v\n", len(c.clusters), changes, c.ss.rate, failures, v.reconciles, v.outcomes)
	b.WriteString("| membership change | members | every cluster engaged once after | target | clusters per member | clusters moved | engagements begun | slowest copy of a change made meanwhile |\n")
	b.WriteString("|---|---:|---:|---|---|---:|---:|---:|\n")
	for _, s := range c.steps {
		fmt.Fprintf(&b, "| %s | %d | %v | %s | %s | %d | %d | %v |\n", s.change, s.members, s.took.Round(10*time.Millisecond), s.target, s.share, s.moved, s.begun, s.slowest.Round(10*time.Millisecond))
	}
	fmt.Fprintf(&b, "engagements: %d; doubles (two members at once): %d; at once while the first holder was stopped past its Lease: %d\n", e.engagements, e.doubles, e.frozen)
	fmt.Fprintf(&b, "reconciles of one cluster by two members at once: both writes accepted %d, ordered by the server %d, one fenced %d, at most one write %d; writes that landed over another member's later look: %d\n",
		v.overlaps, v.ordered, v.fenced, v.other, v.stale)
	if c.late != nil {
		fmt.Fprintf(&b, "the frozen member's reconciles in flight when it was stopped ended, once it was thawed: %v\n", c.late)
	}
	fmt.Fprintf(&b, "every cluster's last change copied %v after the updater stopped\n", converged.Round(10*time.Millisecond))
	t.Log(b.String())
	if failures > 0 {
		t.Errorf("%d of the updater's changes failed", failures)
	}
	if e.doubles != 0 {
		t.Errorf("%d engagements of one cluster by two members at once, e.g. %v", e.doubles, e.examples)
	}
	if v.overlaps != 0 {
		t.Errorf("%d reconciles of one cluster by two members at once with both writes accepted, e.g. %v", v.overlaps, v.examples)
	}
	if v.stale != 0 {
		t.Errorf("%d writes landed over another member's later look at the copy, e.g. %v", v.stale, v.staleExamples)
	}
	if v.open != 0 {
		t.Errorf("%d reconciles entered and never exited (outcomes %v)", v.open, v.outcomes)
	}
}

// testSpreadConfigurations starts two members of one ring whose providers
// select other namespaces together, runs times: each time one takes the
// ring and engages every cluster it finds, the other is refused, naming
// both configurations, is not ready, and engages and reconciles nothing;
// every change of the first's clusters is copied.
func testSpreadConfigurations(t *testing.T, env *envtest.Environment, cs kubernetes.Interface, runs int) {
	wins := map[string]int{}
	for run := range runs {
		ctx := t.Context()
		leases := testenv.Namespace(t, cs, "configs")
		labels := map[string]string{"a": spreadLabel("cfga"), "b": spreadLabel("cfgb")}
		clusters := map[string][]string{"a": makeClusters(t, cs, labels["a"], 3), "b": makeClusters(t, cs, labels["b"], 3)}
		ref := newReferee(t)
		flags := []string{"--ring=configs", "--lease=" + lease.String(), "--workers=2", "--work=10ms"}
		a := startMember(t, env.KubeconfigPath(), leases, "a", ref, append(flags, "--clusters="+labels["a"])...)
		b := startMember(t, env.KubeconfigPath(), leases, "b", ref, append(flags, "--clusters="+labels["b"])...)
		var winner, loser string
		eventually(t, 2*time.Minute, 20*time.Millisecond, func() (bool, string) {
			a.alive(t)
			b.alive(t)
			sa, _ := ref.latest("a")
			sb, _ := ref.latest("b")
			for _, w := range []string{"a", "b"} {
				l, sw, sl := "b", sa, sb
				if w == "b" {
					l, sw, sl = "a", sb, sa
				}
				if _, even := ref.spread([]string{w}, clusters[w]); even && sw.Refused == "" && sw.Ready && sl.Refused != "" && !sl.Ready {
					winner, loser = w, l
					return true, ""
				}
			}
			return false, fmt.Sprintf("run %d: a is ready %v, refused %q; b is ready %v, refused %q; engaged: %v; want one ready serving its clusters, the other refused and not ready",
				run+1, sa.Ready, sa.Refused, sb.Ready, sb.Refused, ref.holders())
		})
		wins[winner]++
		st, _ := ref.latest(loser)
		for _, l := range labels {
			if want := "namespaces(labels: " + report.ClusterLabel + "=" + l + ")"; !strings.Contains(st.Refused, want) {
				t.Errorf("run %d: the refusal does not name %s: %s", run+1, want, st.Refused)
			}
		}
		// Nothing of the ring's configuration is left unserved.
		for _, c := range clusters[winner] {
			if _, err := cs.CoreV1().ConfigMaps(c).Patch(ctx, report.Source, types.MergePatchType, []byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitCopied(ctx, t, cs, clusters[winner], []int{1, 1, 1})
		if n := ref.engagedBy(loser); n != 0 {
			t.Errorf("run %d: the refused member %s engaged %d clusters", run+1, loser, n)
		}
		if n := ref.reconciledBy(loser); n != 0 {
			t.Errorf("run %d: the refused member %s reconciled %d times", run+1, loser, n)
		}
		if h := ref.holders(); slices.ContainsFunc(clusters[loser], func(c string) bool { return len(h[c]) > 0 }) {
			t.Errorf("run %d: a cluster of the refused configuration is engaged: %v", run+1, h)
		}
		t.Logf("run %d: %s's configuration took the ring and copied every change of its %d clusters; %s refused, not ready (%s), engaged nothing: %s",
			run+1, winner, len(clusters[winner]), loser, failedChecks(st.Unready), st.Refused)
		stopAll(t, a, b)
	}
	t.Logf("two configurations started together %d times: a took the ring %d times, b %d times; the other was refused every time", runs, wins["a"], wins["b"])
}

// failedChecks returns the lines of a verbose /readyz answer that name a
// failed check ("[-]...").
func failedChecks(s string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "[-]") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "; ")
}

// testSpreadOff is the negative control of the spread scenarios: the same
// program with no ring (Clusters off) engages every cluster in both
// members, and the referee sees the doubles and reconciles of one cluster
// by both at once with both writes accepted.
func testSpreadOff(t *testing.T, env *envtest.Environment, cs kubernetes.Interface) {
	ctx := t.Context()
	ns := testenv.Namespace(t, cs, "off")
	label := spreadLabel("off")
	clusters := makeClusters(t, cs, label, 4)
	ref := newReferee(t)
	flags := []string{"--workers=4", "--work=100ms", "--clusters=" + label}
	a := startMember(t, env.KubeconfigPath(), ns, "r1", ref, flags...)
	b := startMember(t, env.KubeconfigPath(), ns, "r2", ref, flags...)
	startUpdaterOf(ctx, t, cs, len(clusters), 20, func(i int) (string, string, string) { return clusters[i], report.Source, clusters[i] })
	var v verdict
	var e engagementVerdict
	took := eventually(t, 2*time.Minute, 100*time.Millisecond, func() (bool, string) {
		a.alive(t)
		b.alive(t)
		v, e = ref.judge(), ref.judgeEngagements()
		return e.doubles >= len(clusters) && v.overlaps > 0, fmt.Sprintf("%d doubles of %d clusters and %d overlaps over %d reconciles %v between two members without a ring", e.doubles, len(clusters), v.overlaps, v.reconciles, v.outcomes)
	})
	t.Logf("clusters not spread (no ring): %d double engagements of %d clusters and %d reconciles at once with both writes accepted within %v, over %d reconciles %v; %d writes landed over another member's later look",
		e.doubles, len(clusters), v.overlaps, took.Round(10*time.Millisecond), v.reconciles, v.outcomes, v.stale)
	stopAll(t, a, b)
}
