package e2e_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
)

// slowctlEvent is one line of testdata/slowctl's standard output.
type slowctlEvent struct {
	What string // begin, end, cancelled, signal or stopped
	At   time.Time
	Arg  string // the ConfigMap's name, or stopped's outcome
}

// slowctlEvents parses slowctl's output; what, if not empty, keeps only
// events of that kind.
func slowctlEvents(out []byte, what string) []slowctlEvent {
	var evs []slowctlEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) < 2 {
			continue
		}
		nanos, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		ev := slowctlEvent{What: fields[0], At: time.Unix(0, nanos)}
		if len(fields) == 3 {
			ev.Arg = fields[2]
		}
		if what == "" || ev.What == what {
			evs = append(evs, ev)
		}
	}
	return evs
}

// countSlowctl returns a function counting the events of kind what so far.
func countSlowctl(session *gexec.Session, what string) func() int {
	return func() int { return len(slowctlEvents(session.Out.Contents(), what)) }
}

// startSlowctl runs testdata/slowctl on the suite's control plane for the
// ConfigMaps of ns, with extra flags; a cleanup kills it if the spec has not
// stopped it.
func startSlowctl(ctx SpecContext, ns string, flags ...string) *gexec.Session {
	GinkgoHelper()
	cmd := bins.command(ctx, "slowctl", append([]string{"--kubeconfig=" + env.KubeconfigPath(), "--namespace=" + ns}, flags...)...)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred(), "start slowctl")
	DeferCleanup(func() { session.Kill() }) // no-op once it has exited
	return session
}

var _ = Describe("a controller process receiving SIGTERM", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("lets its 10 in-flight reconciles finish, starts no new one, and exits 0 as soon as they have, well before the drain timeout", func(ctx SpecContext) {
		const (
			workers = 10
			work    = 3 * time.Second
			grace   = 10 * time.Second
		)
		for i := range workers + 5 { // 5 more than the workers: some wait in the queue
			createConfigMap(ctx, ns, fmt.Sprintf("cm-%02d", i), nil)
		}
		session := startSlowctl(ctx, ns, fmt.Sprintf("--workers=%d", workers), "--work="+work.String(), "--grace="+grace.String())
		Eventually(ctx, countSlowctl(session, "begin")).WithTimeout(time.Minute).Should(Equal(workers), "never had %d reconciles in flight", workers)

		By("sending SIGTERM while every worker is busy")
		signalled := time.Now()
		session.Signal(syscall.SIGTERM)
		Eventually(ctx, session).WithTimeout(grace + 10*time.Second).Should(gexec.Exit(0))
		exited := time.Since(signalled)

		out := session.Out.Contents()
		begins, ends := slowctlEvents(out, "begin"), slowctlEvents(out, "end")
		Expect(slowctlEvents(out, "cancelled")).To(BeEmpty(), "a reconcile was cancelled before the drain timeout")
		Expect(begins).To(HaveLen(workers), "a reconcile began after the signal")
		Expect(ends).To(HaveLen(workers))
		for _, b := range begins {
			Expect(b.At).To(BeTemporally("<", signalled), "%s began after the signal", b.Arg)
		}
		for _, e := range ends {
			Expect(e.At).To(BeTemporally(">", signalled), "%s was not in flight at the signal", e.Arg)
		}
		Expect(slowctlEvents(out, "stopped")).To(ConsistOf(HaveField("Arg", "ok")))
		stopped := slowctlEvents(out, "stopped")[0].At.Sub(signalled)
		GinkgoWriter.Printf("Start returned %v and the process exited %v after SIGTERM (work %v, drain timeout %v)\n",
			stopped.Round(time.Millisecond), exited.Round(time.Millisecond), work, grace)
		AddReportEntry("SIGTERM to exit with 10 in-flight 3 s reconciles", exited.Round(time.Millisecond).String())
		// The reconciles had up to 3 s left; everything after them (stopping
		// the cache, exiting) takes well under a second on an idle machine.
		Expect(exited).To(BeNumerically("<", work+3*time.Second), "the process did not exit soon after its reconciles finished")
		Expect(session.Err).NotTo(gbytes.Say("cancelling in-flight reconciles"))
	}, SpecTimeout(4*time.Minute))

	It("exits at once with status 1 on a second signal while draining", func(ctx SpecContext) {
		createConfigMap(ctx, ns, "stuck", nil)
		session := startSlowctl(ctx, ns, "--work=1m", "--grace=1m")
		Eventually(ctx, countSlowctl(session, "begin")).WithTimeout(time.Minute).Should(Equal(1))

		session.Signal(syscall.SIGTERM)
		// SignalContext takes repeats within a second for one signal
		// delivered twice; wait that long (while checking it keeps draining).
		Consistently(ctx, session).WithTimeout(1500 * time.Millisecond).ShouldNot(gexec.Exit())
		Expect(countSlowctl(session, "signal")()).To(Equal(1))

		second := time.Now()
		session.Signal(syscall.SIGTERM)
		Eventually(ctx, session).WithTimeout(10 * time.Second).Should(gexec.Exit(1))
		GinkgoWriter.Printf("exited %v after the second signal\n", time.Since(second).Round(time.Millisecond))
		Expect(time.Since(second)).To(BeNumerically("<", 5*time.Second))
		Expect(session.Err).To(gbytes.Say("second signal"))
		Expect(countSlowctl(session, "end")()).To(BeZero())
	}, SpecTimeout(4*time.Minute))
})
