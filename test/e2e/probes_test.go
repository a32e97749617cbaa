package e2e_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
)

// gadget is the kind of testdata/gadgets.yaml, which only the readiness spec
// installs and deletes.
var gadget = schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Gadget"}

const gadgetCRD = "gadgets.e2e.converge.dev"

// response is what an HTTP GET got.
type response struct {
	Code   int
	Body   string
	Proto  string // "HTTP/1.1" or "HTTP/2.0"
	Header http.Header
}

// httpGet returns a function that GETs url with client, for Eventually.
func httpGet(ctx context.Context, client *http.Client, url string) func() (response, error) {
	return bearerGet(ctx, client, url, "")
}

// bearerGet returns a function that GETs url with client, sending token as
// a bearer token unless it is empty, for Eventually.
func bearerGet(ctx context.Context, client *http.Client, url, token string) func() (response, error) {
	return func() (response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return response{}, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return response{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return response{Code: resp.StatusCode, Body: string(body), Proto: resp.Proto, Header: resp.Header}, err
	}
}

// deleteCRD deletes the CRD called name, if it exists, and waits until it is gone.
func deleteCRD(ctx context.Context, name string) {
	GinkgoHelper()
	crds := dyn.Resource(crdGVR)
	err := crds.Delete(ctx, name, metav1.DeleteOptions{})
	if !apierrors.IsNotFound(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(ctx, func() error {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		return err
	}).WithTimeout(30 * time.Second).Should(Satisfy(apierrors.IsNotFound))
}

var _ = Describe("health probes", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("serves /readyz 503 until the caches sync, 200 once they have, and 503 again when a watched CRD is deleted", func(ctx SpecContext) {
		_, err := dyn.Resource(crdGVR).Get(ctx, gadgetCRD, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Gadget CRD must not be installed before this spec: %v", err)
		// After the manager stops (cleanups run in reverse order), so the spec
		// can run again on the same control plane even when it fails midway.
		DeferCleanup(deleteCRD, gadgetCRD, NodeTimeout(time.Minute))

		// A negative SyncTimeout: Start waits for the Gadget kind as long as
		// it takes, so "before sync" lasts until the spec installs the CRD.
		mgr := newManager(ns, framework.Options{
			HealthProbeBindAddress: "127.0.0.1:0",
			Cache:                  informers.Options{SyncTimeout: -1},
		})
		Expect(framework.NewBuilder[*unstructured.Unstructured](mgr, "gadgets",
			framework.ControllerOptions{Selection: informers.Selection{Kind: gadget}}).
			CompleteByKey(countingReconciler(newRecorder()))).To(Succeed())
		startManager(ctx, mgr)
		Eventually(ctx, mgr.HealthProbeAddress).ShouldNot(BeEmpty())
		base := "http://" + mgr.HealthProbeAddress()
		readyz := httpGet(ctx, http.DefaultClient, base+"/readyz")

		By("answering 503 while the kind's cache cannot sync")
		Consistently(ctx, readyz).WithTimeout(time.Second).Should(HaveField("Code", http.StatusServiceUnavailable))
		Expect(readyz()).To(HaveField("Body", And(ContainSubstring("Gadget"), ContainSubstring("resource not found"))))
		Expect(httpGet(ctx, http.DefaultClient, base+"/healthz")()).To(HaveField("Code", http.StatusOK), "liveness failed while waiting for a cache")

		By("answering 200 once the CRD is installed and the cache synced")
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "gadgets.yaml")}})).To(Succeed())
		// The reflector retries with a jittered backoff that has grown while
		// the kind was missing.
		Eventually(ctx, readyz).WithTimeout(45 * time.Second).Should(And(HaveField("Code", http.StatusOK), HaveField("Body", "ok")))
		Expect(httpGet(ctx, http.DefaultClient, base+"/readyz?verbose")()).To(HaveField("Body", ContainSubstring("[+]caches ok")))

		By("answering 503 again, naming the kind, once the CRD is deleted")
		deleteCRD(ctx, gadgetCRD)
		Eventually(ctx, readyz).WithTimeout(30 * time.Second).Should(HaveField("Code", http.StatusServiceUnavailable))
		res, err := readyz()
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("/readyz after the CRD was deleted: %s\n", res.Body)
		Expect(res.Body).To(And(ContainSubstring("[-]caches failed"), ContainSubstring("Gadget"), ContainSubstring("not found")))
		Expect(httpGet(ctx, http.DefaultClient, base+"/healthz")()).To(HaveField("Code", http.StatusOK))
	}, SpecTimeout(2*time.Minute))
})
