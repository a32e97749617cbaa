package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
)

// chromiumPath is the headless Chromium the browser spec drives:
// $CONVERGE_CHROMIUM, else what hack/chromium.sh installs (make browser,
// part of make test-e2e).
func chromiumPath() string {
	GinkgoHelper()
	if p := os.Getenv("CONVERGE_CHROMIUM"); p != "" {
		return p
	}
	out, err := exec.Command("../../hack/chromium.sh", "--print").Output()
	Expect(err).NotTo(HaveOccurred())
	p := strings.TrimSpace(string(out))
	Expect(p).NotTo(BeEmpty(), "no Chromium: run make browser (hack/chromium.sh installs Debian's chromium package), or set CONVERGE_CHROMIUM")
	return p
}

// chromium runs headless Chromium with args, offline: no first-run, sync,
// component update or background networking, and a profile of its own.
func chromium(ctx context.Context, args ...string) []byte {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--hide-scrollbars", "--user-data-dir=" + GinkgoT().TempDir()}
	cmd := exec.CommandContext(ctx, chromiumPath(), append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Run()).To(Succeed(), "chromium %s\n%s", strings.Join(args, " "), stderr.String())
	return stdout.Bytes()
}

// artifactsDir is where the browser spec leaves its screenshot:
// $CONVERGE_E2E_ARTIFACTS, else test/e2e/_output (ignored by git).
func artifactsDir() string {
	GinkgoHelper()
	dir := os.Getenv("CONVERGE_E2E_ARTIFACTS")
	if dir == "" {
		dir = "_output"
	}
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	abs, err := filepath.Abs(dir)
	Expect(err).NotTo(HaveOccurred())
	return abs
}

// tickerTotal reads the ticker controller's total reconciles off the page.
var tickerTotal = regexp.MustCompile(`(?s)data-controller="ticker".*?<span class="total"[^>]*>(\d+)</span>`)

func totalOf(page string) int {
	GinkgoHelper()
	m := tickerTotal.FindStringSubmatch(page)
	Expect(m).NotTo(BeNil(), "no ticker row in the page:\n%s", page)
	n, err := strconv.Atoi(m[1])
	Expect(err).NotTo(HaveOccurred())
	return n
}

var _ = Describe("debug page in a browser", func() {
	It("lists the controllers and the objects not converged, shows a failing key's timeline with its error, updates live numbers without a reload, fits 1,280 pixels, and is screenshotted", func(ctx SpecContext) {
		// A controller with a long name, of a kind with a group, widens
		// the controllers' table as real ones do.
		// A second cluster, engaged by a provider (the suite's control
		// plane again, under another name), gets the page a Clusters table.
		mirror := cluster.ProviderFunc(func(pctx context.Context, e cluster.Engager) error {
			if err := e.Engage(cluster.Target{Name: "mirror", Config: cfg, Source: "the suite's control plane"}); err != nil {
				return err
			}
			<-pctx.Done()
			return nil
		})
		f := newDebugFixture(ctx, framework.Options{Clusters: cluster.Options{Providers: []cluster.Provider{mirror}}}, 0, func(mgr *framework.Manager) {
			Expect(framework.NewBuilder[*appsv1.Deployment](mgr, "webapp-deployments-and-services-reconciler", framework.ControllerOptions{Workers: 10}).
				CompleteByKey(countingReconciler(newRecorder()))).To(Succeed())
		})
		// A read of a kind nothing watches starts an informer, which the
		// page flags.
		Expect(f.mgr.Client().List(ctx, &corev1.ServiceAccountList{})).To(Succeed())
		page := f.url("?controller=credentials&key=" + f.ns + "/bad")
		Eventually(ctx, func(g Gomega) {
			g.Expect(f.object(ctx, "credentials", "bad").Queue.Retries).To(BeNumerically(">=", 3))
		}).Should(Succeed())

		res, err := httpGet(ctx, http.DefaultClient, page)()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusOK))
		served := totalOf(res.Body)

		By("loading the page and letting its script refresh it")
		// Virtual time lets the page's two-second refresh run a few times
		// without the test waiting for it; the network fetches it makes
		// still complete.
		dom := string(chromium(ctx, "--virtual-time-budget=7000", "--dump-dom", page))
		for _, name := range []string{"credentials", "held", "ticker"} {
			Expect(dom).To(ContainSubstring(`data-controller="` + name + `"`))
		}
		Expect(dom).To(MatchRegexp(`<li class="record error">.*rotate credentials of %s/bad: vault is sealed`, f.ns))
		Expect(dom).To(MatchRegexp(`<b>(next retry|queued|started)</b>`), "the timeline shows where the key stands now")
		Expect(dom).To(MatchRegexp(`<body data-refreshed="[1-9]`), "the script never refreshed the page")
		Expect(totalOf(dom)).To(BeNumerically(">", served), "the ticker's reconciles did not move without a reload")
		Expect(dom).NotTo(ContainSubstring(secretValue))

		By("showing each informer's objects and estimated bytes, flagging the one a read started, the totals per kind and the process's heap")
		Expect(dom).To(MatchRegexp(`<tr class="informer-row"><td>v1 ConfigMap in namespace [^<]+</td><td class="num">\d+</td><td class="num bytes">[0-9.]+ [KM]iB</td>`))
		Expect(dom).To(MatchRegexp(`<tr class="informer-row" data-started-by-read=""><td>v1 ServiceAccount in namespace [^<]+ <span class="warn flag"[^>]*>started by a read</span>`))
		Expect(dom).To(MatchRegexp(`<tr class="kind-total" data-kind="v1 ConfigMap"><td>v1 ConfigMap</td><td class="num">1</td><td class="num">\d+</td><td class="num bytes">[0-9.]+ [KM]iB</td>`))
		Expect(dom).To(MatchRegexp(`<tr class="kind-total" data-kind="v1 ServiceAccount"><td>v1 ServiceAccount <span class="warn flag">1 started by a read</span>`))
		Expect(dom).To(MatchRegexp(`heap: <b class="live">[0-9.]+ MiB</b> live · cache estimate <b class="cache">[0-9.]+ [KM]iB</b> \(shared values [0-9.]+ [KM]?i?B\) · unattributed <b class="rest">[0-9.]+ MiB</b>`))

		By("listing the engaged clusters with their state and cache")
		Expect(dom).To(MatchRegexp(`<tr class="cluster-row" data-cluster="" data-state="ready"><td><i>own</i></td>`))
		Expect(dom).To(MatchRegexp(`<tr class="cluster-row" data-cluster="mirror" data-state="ready"><td>mirror</td><td>the suite's control plane</td><td><span class="ok">ready</span></td><td>[^<]+</td>(<td class="num">\d+</td>){4}<td class="num bytes">[0-9.]+ [KM]?i?B</td>`))

		By("listing the failing and the waiting object among those not converged, each linking to its explanation")
		list := regexp.MustCompile(`(?s)<table class="notconverged" data-controller="credentials">.*?</table>`).FindString(dom)
		Expect(list).NotTo(BeEmpty(), "no list of the credentials controller's objects not converged:\n%s", dom)
		// Between two tries the failing key is "failing"; while it is tried
		// again, "in flight", with its failures and last error.
		Expect(list).To(MatchRegexp(`<tr class="key" data-state="(failing|in flight)"><td class="name"><a href="\?controller=credentials&amp;key=%s%%2Fbad">%s/bad</a>.*rotate credentials of %s/bad: vault is sealed`, f.ns, f.ns, f.ns))
		Expect(list).To(MatchRegexp(`<tr class="key" data-state="waiting"><td class="name"><a href="\?controller=credentials&amp;key=%s%%2Fweb">%s/web</a>.*Deployment web waits for Job migrate \(Complete\)`, f.ns, f.ns))
		Expect(list).NotTo(ContainSubstring(f.ns+"/good<"), "a converged object is listed")

		By("fitting 1,280 pixels without scrolling sideways")
		dom = string(chromium(ctx, "--virtual-time-budget=1000", "--window-size=1280,900", "--dump-dom", page))
		Expect(dom).To(ContainSubstring(`data-controller="credentials"`))
		Expect(dom).NotTo(ContainSubstring("overflows"), "a table is wider than a 1,280-pixel window")

		By("saving a screenshot")
		shot := filepath.Join(artifactsDir(), "debug-page.png")
		chromium(ctx, "--virtual-time-budget=3000", "--window-size=1280,860", "--screenshot="+shot, page)
		png, err := os.ReadFile(shot)
		Expect(err).NotTo(HaveOccurred())
		Expect(png).To(HavePrefix("\x89PNG"))
		Expect(len(png)).To(BeNumerically("<", 1<<20))
		AddReportEntry("screenshot", shot)

		By("fitting a phone's screen")
		dom = string(chromium(ctx, "--virtual-time-budget=1000", "--window-size=390,844", "--dump-dom", page))
		Expect(dom).To(ContainSubstring(`name="viewport"`))
		Expect(dom).To(ContainSubstring(`data-controller="credentials"`))
		// The controllers' table scrolls sideways there, and says so: the
		// check of the 1,280-pixel window above can see a table too wide.
		Expect(dom).To(ContainSubstring(`class="scroll overflows"`))
	}, SpecTimeout(4*time.Minute))
})
