package e2e_test

import (
	"crypto/tls"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/converge-dev/converge/framework"
)

// insecureTLSClient is an HTTPS client that accepts any certificate (the
// metrics server's is self-signed by default, as scrapers of pods accept)
// and would speak HTTP/2 if the server offered it.
func insecureTLSClient() *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed test server
			ForceAttemptHTTP2: true,
		},
	}
}

var _ = Describe("secure metrics", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("serves /metrics over HTTPS only to bearer tokens whose identity may get /metrics: 401 without one, 403 without the grant, 200 with it", func(ctx SpecContext) {
		mgr := newManager(ns, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0"}})
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "guarded", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(newRecorder()))).To(Succeed())
		startManager(ctx, mgr)
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		url := "https://" + mgr.MetricsAddress() + "/metrics"
		client := insecureTLSClient()

		nobody, _ := serviceAccountToken(ctx, ns, "nobody")
		scraper, scraperUser := serviceAccountToken(ctx, ns, "scraper")
		grantClusterRole(ctx, "e2e-metrics-reader-"+ns,
			[]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, serviceAccount(ns, "scraper"))
		// The filter caches each decision for a few seconds: ask only once
		// the API server's authorizer has the grant.
		Eventually(ctx, allowed(ctx, scraperUser, []string{"system:serviceaccounts"}, nil, &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"})).Should(BeTrue())

		By("refusing a request without a token")
		res, err := bearerGet(ctx, client, url, "")()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusUnauthorized))
		Expect(res.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
		Expect(res.Body).NotTo(ContainSubstring("controller_runtime"))

		By("refusing a token the API server does not know")
		Expect(bearerGet(ctx, client, url, "not-a-token")()).To(HaveField("Code", http.StatusUnauthorized))

		By("forbidding an authenticated identity without the grant")
		res, err = bearerGet(ctx, client, url, nobody)()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusForbidden))
		Expect(res.Body).NotTo(ContainSubstring("controller_runtime"))

		By("serving the identity with the grant, over HTTP/1.1 only")
		res, err = bearerGet(ctx, client, url, scraper)()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusOK))
		Expect(res.Body).To(ContainSubstring(`controller_runtime_max_concurrent_reconciles{controller="guarded"} 1`))
		Expect(res.Proto).To(Equal("HTTP/1.1"), "HTTP/2 is served although Metrics.EnableHTTP2 is off")

		By("refusing plain HTTP")
		res, err = httpGet(ctx, http.DefaultClient, "http://"+mgr.MetricsAddress()+"/metrics")()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Code).To(Equal(http.StatusBadRequest))
		Expect(res.Body).NotTo(ContainSubstring("controller_runtime"))
	}, SpecTimeout(time.Minute))
})
