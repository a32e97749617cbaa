package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/envtest"
)

// podloggerRBAC is the example's documented minimal RBAC.
const podloggerRBAC = "../../examples/podlogger/rbac.yaml"

// podLogged matches the podlogger's log line msg about the pod ns/name.
func podLogged(msg, ns, name string) OmegaMatcher {
	return gbytes.Say(fmt.Sprintf(`%s\b.*\bnamespace=%s\b.*\bname=%s\b`, regexp.QuoteMeta(msg), regexp.QuoteMeta(ns), regexp.QuoteMeta(name)))
}

// restrictedUser returns the name of a new client-certificate user, unique
// to the spec, and a kubeconfig file authenticating as it. RBAC grants it
// nothing yet.
func restrictedUser(ctx context.Context, prefix, ns string) (user, kubeconfig string) {
	GinkgoHelper()
	user = prefix + "-" + ns
	userCfg, err := env.AddUser(envtest.User{Name: user})
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(envtest.WriteKubeconfig(kubeconfig, userCfg)).To(Succeed())
	return user, kubeconfig
}

// startPodlogger runs the podlogger example with args; a cleanup kills it if
// the spec has not stopped it.
func startPodlogger(ctx context.Context, args ...string) *gexec.Session {
	GinkgoHelper()
	session, err := gexec.Start(bins.command(ctx, "podlogger", args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred(), "start podlogger")
	DeferCleanup(func() { session.Kill() })
	return session
}

var _ = Describe("the podlogger example under least privilege", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("works as a user granted exactly the documented RBAC: pods, plus the Lease with --leader-elect and the reviews with secure metrics", func(ctx SpecContext) {
		rbac := readRBAC(podloggerRBAC)
		Expect(rbac.clusterRoles).To(HaveKey("podlogger"))
		Expect(rbac.roles).To(HaveKey("podlogger-leader-election"))
		Expect(rbac.clusterRoles).To(HaveKey("podlogger-metrics-auth"))
		Expect(rbac.clusterRoles).To(HaveKey("podlogger-metrics-reader"))

		user, kubeconfig := restrictedUser(ctx, "podlogger", ns)
		grantClusterRole(ctx, "podlogger-"+ns, rbac.clusterRoles["podlogger"], userSubject(user))
		grantRole(ctx, ns, "podlogger-leader-election", rbac.roles["podlogger-leader-election"], userSubject(user))
		grantClusterRole(ctx, "podlogger-metrics-auth-"+ns, rbac.clusterRoles["podlogger-metrics-auth"], userSubject(user))
		scraper, scraperUser := serviceAccountToken(ctx, ns, "prometheus")
		grantClusterRole(ctx, "podlogger-metrics-reader-"+ns, rbac.clusterRoles["podlogger-metrics-reader"], serviceAccount(ns, "prometheus"))
		Eventually(ctx, allowed(ctx, user, nil, &authzv1.ResourceAttributes{Resource: "pods", Verb: "list"}, nil)).Should(BeTrue())
		Eventually(ctx, allowed(ctx, scraperUser, []string{"system:serviceaccounts"}, nil, &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"})).Should(BeTrue())

		probes, metrics := freeAddress(), freeAddress()
		session := startPodlogger(ctx, "--kubeconfig="+kubeconfig,
			"--leader-elect", "--leader-election-namespace="+ns,
			"--health-probe-bind-address="+probes, "--metrics-bind-address="+metrics)

		By("logging a new pod")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, newPod(ns, "watched"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(session.Err).WithTimeout(time.Minute).Should(podLogged("pod appeared", ns, "watched"))
		Expect(httpGet(ctx, http.DefaultClient, "http://"+probes+"/readyz")()).To(HaveField("Code", http.StatusOK))

		By("serving metrics to the scraper the documented reader role is bound to")
		res, err := bearerGet(ctx, insecureTLSClient(), "https://"+metrics+"/metrics", scraper)()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusOK), res.Body)
		Expect(res.Body).To(ContainSubstring(`leader_election_master_status{name="podlogger"} 1`))

		By("releasing the Lease and exiting 0 on SIGINT")
		session.Interrupt()
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
		Expect(string(session.Err.Contents())).NotTo(MatchRegexp(`(?i)forbidden`), "the documented RBAC is not enough")
		lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, "podlogger", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "the lease was not released")
	}, SpecTimeout(4*time.Minute))

	It("is unready, naming the verb and resource, while it may not list pods, and recovers without a restart once it may", func(ctx SpecContext) {
		documented := readRBAC(podloggerRBAC).clusterRoles["podlogger"]
		Expect(documented).To(HaveLen(1))
		// Without watch too: client-go's informers fill their cache with a
		// watch-list stream (WatchListClient, on by default), which needs
		// watch only, and fall back to list when it is refused. A role with
		// get and watch but no list is enough for the podlogger (an earlier
		// version of this spec found it ready with one).
		withoutList := []rbacv1.PolicyRule{*documented[0].DeepCopy()}
		withoutList[0].Verbs = slices.DeleteFunc(withoutList[0].Verbs, func(v string) bool { return v == "list" || v == "watch" })
		Expect(withoutList[0].Verbs).To(ConsistOf("get"))

		user, kubeconfig := restrictedUser(ctx, "podlogger-nolist", ns)
		role := "podlogger-nolist-" + ns
		grantClusterRole(ctx, role, withoutList, userSubject(user))
		probes, metrics := freeAddress(), freeAddress()
		session := startPodlogger(ctx, "--kubeconfig="+kubeconfig,
			"--health-probe-bind-address="+probes, "--metrics-bind-address="+metrics, "--metrics-insecure")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, newPod(ns, "unseen"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("answering /readyz 503 with the forbidden verb and resource")
		readyz := httpGet(ctx, http.DefaultClient, "http://"+probes+"/readyz")
		Eventually(ctx, readyz).WithTimeout(time.Minute).Should(And(
			HaveField("Code", http.StatusServiceUnavailable),
			HaveField("Body", And(ContainSubstring("forbidden"), ContainSubstring("list"), ContainSubstring(`"pods"`))),
		))
		res, _ := readyz()
		GinkgoWriter.Printf("/readyz while list is forbidden:\n%s\n", res.Body)

		By("logging the forbidden list, and counting it in a metric")
		Eventually(session.Err).Should(gbytes.Say(`pods is forbidden: User .{0,2}` + regexp.QuoteMeta(user) + `.{0,2} cannot list resource`))
		Eventually(ctx, seriesValue(ctx, "http://"+metrics+"/metrics", "converge_cache_request_errors_total",
			map[string]string{"resource": "pods", "verb": "list", "reason": "forbidden"})).Should(BeNumerically(">", 0))
		Expect(session).NotTo(gexec.Exit(), "podlogger gave up instead of waiting for access")

		By("granting list")
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		cr.Rules = documented
		_, err = kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		granted := time.Now()
		Eventually(ctx, readyz).WithTimeout(30 * time.Second).Should(HaveField("Code", http.StatusOK))
		Eventually(session.Err).WithTimeout(30 * time.Second).Should(podLogged("pod appeared", ns, "unseen"))
		recovered := time.Since(granted)
		GinkgoWriter.Printf("ready and reconciling %v after list was granted\n", recovered.Round(time.Millisecond))
		AddReportEntry("podlogger recovery after list was granted", recovered.Round(time.Millisecond).String())
		Expect(recovered).To(BeNumerically("<", 30*time.Second))

		session.Interrupt()
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
	}, SpecTimeout(4*time.Minute))
})
