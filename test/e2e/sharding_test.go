package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// served returns the number of buckets a sharded slowctl last reported
// serving, -1 before its first report.
func served(s *gexec.Session) int {
	evs := slowctlEvents(s.Out.Contents(), "buckets")
	if len(evs) == 0 {
		return -1
	}
	n, _ := strconv.Atoi(evs[len(evs)-1].Arg)
	return n
}

// overlaps returns the names reconciled by a and b at once: a begin of one
// between a begin and the matching end of the other. A reconcile still
// running when its process was killed runs until killedAt.
func overlaps(a, b []byte, killedAt time.Time) []string {
	type span struct{ from, to time.Time }
	spans := func(out []byte) map[string][]span {
		open := map[string]time.Time{}
		done := map[string][]span{}
		for _, ev := range slowctlEvents(out, "") {
			switch ev.What {
			case "begin":
				open[ev.Arg] = ev.At
			case "end", "cancelled":
				done[ev.Arg] = append(done[ev.Arg], span{open[ev.Arg], ev.At})
				delete(open, ev.Arg)
			}
		}
		for name, from := range open {
			done[name] = append(done[name], span{from, killedAt})
		}
		return done
	}
	sa, sb := spans(a), spans(b)
	var out []string
	for name, as := range sa {
		for _, x := range as {
			for _, y := range sb[name] {
				if x.from.Before(y.to) && y.from.Before(x.to) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// frozenDuring reports whether a reconcile of name in out began before at
// and ended after it (or never).
func frozenDuring(out []byte, name string, at time.Time) bool {
	var begun time.Time
	for _, ev := range slowctlEvents(out, "") {
		if ev.Arg != name {
			continue
		}
		switch ev.What {
		case "begin":
			begun = ev.At
		case "end", "cancelled":
			if !begun.IsZero() && begun.Before(at) && ev.At.After(at) {
				return true
			}
			begun = time.Time{}
		}
	}
	return !begun.IsZero() && begun.Before(at)
}

// patchVersions sets data v of ConfigMaps cm-00 to cm-<n-1> of ns to v(i).
func patchVersions(ctx context.Context, ns string, n int, v func(i int) string) {
	GinkgoHelper()
	for i := range n {
		patch := fmt.Sprintf(`{"data":{"v":%q}}`, v(i))
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%02d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

var _ = Describe("a sharded controller in two processes", func() {
	It("splits the buckets; when one process is killed, restarted, frozen past its lease and thawed, every bucket is served again and no key is reconciled by both at once", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for i := range 40 {
			createConfigMap(ctx, ns, fmt.Sprintf("cm-%02d", i), nil)
		}
		flags := []string{"--ring=e2e", "--workers=4", "--work=20ms", "--lease=4s"}
		a := startSlowctl(ctx, ns, append(flags, "--identity=a")...)
		Eventually(func() int { return served(a) }).WithTimeout(time.Minute).Should(Equal(32), "a alone serves every bucket")
		b := startSlowctl(ctx, ns, append(flags, "--identity=b")...)
		Eventually(func() []int { return []int{served(a), served(b)} }).WithTimeout(time.Minute).
			Should(Equal([]int{16, 16}), "a and b split the buckets")

		b.Kill()
		killed := time.Now()
		Eventually(b).WithTimeout(time.Minute).Should(gexec.Exit())
		Eventually(func() int { return served(a) }).WithTimeout(time.Minute).Should(Equal(32), "a serves every bucket after b was killed")
		took := time.Since(killed)
		GinkgoWriter.Printf("crash to all 32 buckets served again: %v (LeaseDuration 4s plus sync; target: LeaseDuration plus sync)\n", took.Round(time.Millisecond))
		AddReportEntry("crash to all buckets served", took.Round(time.Millisecond).String())

		// Every object changes once more, and a reconciles each.
		since := time.Now()
		patchVersions(ctx, ns, 40, func(int) string { return "2" })
		Eventually(func() map[string]bool {
			ended := map[string]bool{}
			for _, ev := range slowctlEvents(a.Out.Contents(), "end") {
				if ev.At.After(since) {
					ended[ev.Arg] = true
				}
			}
			return ended
		}).WithTimeout(time.Minute).Should(HaveLen(40), "a reconciles every changed object")
		Expect(overlaps(a.Out.Contents(), b.Out.Contents(), killed)).To(BeEmpty(), "keys reconciled by a and b at once")

		// b comes back under the same identity and takes its share again.
		b2 := startSlowctl(ctx, ns, append(flags, "--identity=b")...)
		restarted := time.Now()
		Eventually(func() []int { return []int{served(a), served(b2)} }).WithTimeout(time.Minute).
			Should(Equal([]int{16, 16}), "a and the restarted b split the buckets")
		GinkgoWriter.Printf("join to rebalanced: %v (target: under 5s)\n", time.Since(restarted).Round(time.Millisecond))

		// b2 is frozen past its lease (a partition): a takes its buckets;
		// thawed, b2 finds them taken and gets its share back by handover.
		Expect(b2.Command.Process.Signal(syscall.SIGSTOP)).To(Succeed())
		frozen := time.Now()
		Eventually(func() int { return served(a) }).WithTimeout(time.Minute).Should(Equal(32), "a serves every bucket while b is frozen")
		GinkgoWriter.Printf("freeze to all 32 buckets served by a: %v\n", time.Since(frozen).Round(time.Millisecond))
		Expect(b2.Command.Process.Signal(syscall.SIGCONT)).To(Succeed())
		thawed := time.Now()
		Eventually(func() []int { return []int{served(a), served(b2)} }).WithTimeout(time.Minute).
			Should(Equal([]int{16, 16}), "a and the thawed b split the buckets again")
		GinkgoWriter.Printf("thaw to rebalanced: %v\n", time.Since(thawed).Round(time.Millisecond))

		since = time.Now()
		patchVersions(ctx, ns, 40, func(i int) string { return fmt.Sprintf("3-%d", i) })
		Eventually(func() map[string]bool {
			ended := map[string]bool{}
			for _, s := range []*gexec.Session{a, b2} {
				for _, ev := range slowctlEvents(s.Out.Contents(), "end") {
					if ev.At.After(since) {
						ended[ev.Arg] = true
					}
				}
			}
			return ended
		}).WithTimeout(time.Minute).Should(HaveLen(40), "every changed object reconciled by a or b")
		// A reconcile frozen with b2 ran on in a process whose writes were
		// fenced; b2's others must not overlap a's.
		var fenced int
		for _, name := range overlaps(a.Out.Contents(), b2.Out.Contents(), time.Now()) {
			if frozenDuring(b2.Out.Contents(), name, frozen) {
				fenced++
				continue
			}
			Fail("key " + name + " reconciled by a and the restarted b at once, outside the freeze")
		}
		GinkgoWriter.Printf("reconciles frozen with b and overlapping a's (their writes fenced): %d\n", fenced)
	})

	It("is seen overlapping by the same check when the two processes do not shard (the negative control)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for i := range 10 {
			createConfigMap(ctx, ns, fmt.Sprintf("cm-%02d", i), nil)
		}
		a := startSlowctl(ctx, ns, "--workers=4", "--work=300ms")
		b := startSlowctl(ctx, ns, "--workers=4", "--work=300ms")
		Eventually(func() int { return len(slowctlEvents(a.Out.Contents(), "end")) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 10))
		Eventually(func() int { return len(slowctlEvents(b.Out.Contents(), "end")) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 10))
		patchVersions(ctx, ns, 10, func(int) string { return "2" })
		Eventually(func() []string { return overlaps(a.Out.Contents(), b.Out.Contents(), time.Now()) }).
			WithTimeout(time.Minute).ShouldNot(BeEmpty(), "two unsharded processes reconcile the same keys at once")
	})
})
