package e2e_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

// canary returns a random value that appears nowhere but where a spec puts it.
func canary() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// leaks returns the lines of output that hold any 12 consecutive characters
// of secret: enough to find it whole, split across the lines of a hex dump
// (client-go dumps protobuf bodies that way), or cut short.
func leaks(output []string, secret string) []string {
	const window = 12
	var out []string
	for _, line := range output {
		for i := 0; i+window <= len(secret); i++ {
			if strings.Contains(line, secret[i:i+window]) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

var _ = Describe("secrets in logs", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("never writes Secret data or bearer tokens to the output of a controller reconciling Secrets at -v=10", func(ctx SpecContext) {
		// testdata/secretctl copies each Secret by server-side apply, marks
		// the original, records an Event, and serves secure metrics: Secret
		// data goes through the cache, the client's reads and writes and the
		// event recorder; tokens through its own client and the metrics
		// filter. It authenticates with a service account token.
		token, user := serviceAccountToken(ctx, ns, "secretctl")
		grantRole(ctx, ns, "secretctl", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		}, serviceAccount(ns, "secretctl"))
		// TokenReviews and SubjectAccessReviews, for the metrics filter.
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "secretctl-auth-delegator-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   []rbacv1.Subject{serviceAccount(ns, "secretctl")},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		scraper, scraperUser := serviceAccountToken(ctx, ns, "scraper")
		grantClusterRole(ctx, "secretctl-metrics-reader-"+ns,
			[]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, serviceAccount(ns, "scraper"))
		Eventually(ctx, allowed(ctx, user, []string{"system:serviceaccounts"}, &authzv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "create"}, nil)).Should(BeTrue())
		Eventually(ctx, allowed(ctx, scraperUser, []string{"system:serviceaccounts"}, nil, &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"})).Should(BeTrue())

		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(envtest.WriteKubeconfig(kubeconfig, &rest.Config{
			Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData},
		})).To(Succeed())

		first, second := canary(), canary()
		secrets := kube.CoreV1().Secrets(ns)
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "canary"},
			Data:       map[string][]byte{"password": []byte(first)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		metrics := freeAddress()
		cmd := bins.command(ctx, "secretctl", "--kubeconfig="+kubeconfig, "--namespace="+ns, "-v=10",
			"--metrics-bind-address="+metrics, "--health-probe-bind-address=0")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill() })

		copied := func() (string, error) {
			s, err := secrets.Get(ctx, "canary-copy", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(s.Data["password"]), nil
		}
		By("reconciling the Secret as it is created")
		Eventually(ctx, copied).WithTimeout(time.Minute).Should(Equal(first))

		By("reconciling it as it changes")
		// A patch, not an update: the controller annotates the Secret meanwhile.
		patch := fmt.Sprintf(`{"stringData":{"password":%q}}`, second)
		_, err = secrets.Patch(ctx, "canary", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, copied).Should(Equal(second))
		Eventually(ctx, func() (map[string]string, error) {
			s, err := secrets.Get(ctx, "canary", metav1.GetOptions{})
			return s.GetAnnotations(), err
		}).Should(HaveKeyWithValue("e2e.converge.dev/copied", "true"))

		By("scraping metrics with a token, and trying with tokens that are refused")
		url := "https://" + metrics + "/metrics"
		Eventually(ctx, bearerGet(ctx, insecureTLSClient(), url, scraper)).Should(HaveField("Code", http.StatusOK))
		Expect(bearerGet(ctx, insecureTLSClient(), url, token)()).To(HaveField("Code", http.StatusForbidden))
		forged := scraper[:len(scraper)-4] + "AAAA"
		Expect(bearerGet(ctx, insecureTLSClient(), url, forged)()).To(HaveField("Code", http.StatusUnauthorized))

		session.Interrupt()
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))

		output := string(session.Out.Contents()) + string(session.Err.Contents())
		// The run was at full verbosity: the per-reconcile V(5) lines are there.
		Expect(output).To(ContainSubstring(`msg=reconciled`), "the program did not log at high verbosity")
		Expect(output).To(ContainSubstring(`msg="copied secret"`))
		lines := strings.Split(output, "\n")
		GinkgoWriter.Printf("secretctl wrote %d lines at -v=10\n", len(lines))
		signature := func(jwt string) string { return jwt[strings.LastIndex(jwt, ".")+1:] } // the header and claims are not secret
		message := regexp.MustCompile(`msg="[^"]*"|msg=\S+`)
		var found []string
		for what, secret := range map[string]string{
			"the first canary":            first,
			"the second canary":           second,
			"the first canary in base64":  base64.StdEncoding.EncodeToString([]byte(first)),
			"the second canary in base64": base64.StdEncoding.EncodeToString([]byte(second)),
			"secretctl's bearer token (its API credentials, also sent to /metrics)": signature(token),
			"the scraper's bearer token": signature(scraper),
			"the forged bearer token":    signature(forged),
		} {
			if l := leaks(lines, secret); len(l) > 0 {
				found = append(found, fmt.Sprintf("%s: %d lines, the first %s: %.200s", what, len(l), message.FindString(l[0]), l[0]))
			}
		}
		Expect(found).To(BeEmpty(), "secrets in the output")
	}, SpecTimeout(4*time.Minute))
})
