package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// sentWrites records the writes a manager sends and the API server's
// answers. It is safe for concurrent use.
type sentWrites struct {
	mu sync.Mutex
	// writes are every PATCH, PUT and DELETE sent; mu guards it.
	writes []sentWrite
}

// sentWrite is one write: its method, path, body and the answer's status.
type sentWrite struct {
	method, path string
	body         map[string]any
	code         int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap is a rest.Config's WrapTransport recording into l.
func (l *sentWrites) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodPatch && r.Method != http.MethodPut && r.Method != http.MethodDelete {
			return rt.RoundTrip(r)
		}
		w := sentWrite{method: r.Method, path: r.URL.Path}
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(b))
			_ = json.Unmarshal(b, &w.body)
		}
		resp, err := rt.RoundTrip(r)
		if resp != nil {
			w.code = resp.StatusCode
		}
		l.mu.Lock()
		l.writes = append(l.writes, w)
		l.mu.Unlock()
		return resp, err
	})
}

// sent returns the writes of method to a path ending in suffix.
func (l *sentWrites) sent(method, suffix string) []sentWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sentWrite
	for _, w := range l.writes {
		if w.method == method && strings.HasSuffix(w.path, suffix) {
			out = append(out, w)
		}
	}
	return out
}

// field returns the string at path in w's body, "" when there is none.
func (w sentWrite) field(path ...string) string {
	var cur any = w.body
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

var _ = Describe("a sharded declarative controller's writes", func() {
	It("are conditional on the objects as the reconcile read them: child applies, status applies and prunes", func(ctx SpecContext) {
		ring := "conditional-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		leases := newNamespace(ctx)
		log := &sentWrites{}
		c := rest.CopyConfig(cfg)
		c.WrapTransport = log.wrap
		a := startSiteMemberWith(ctx, c, ring, leases, "a", newSites(), ringSites(ring))
		Eventually(ctx, a.serving).WithTimeout(30*time.Second).Should(HaveLen(32), "a serves every bucket")
		_, nss := siteNamespaces(ctx, ring, 1, a)
		ns := nss[0]
		Eventually(ctx, siteReady(ctx, ns, "site")).WithTimeout(time.Minute).Should(Succeed())

		By("drifting the site's ConfigMap: the apply that reverts it names the version it read")
		drifted, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "site", types.MergePatchType, []byte(`{"data":{"index.html":"by hand"}}`), metav1.PatchOptions{FieldManager: "someone-else"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, configMapData(ctx, ns, "site")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("index.html", ns), "the drift was reverted")
		reverts := log.sent(http.MethodPatch, "/namespaces/"+ns+"/configmaps/site")
		Expect(reverts).NotTo(BeEmpty())
		Expect(reverts[len(reverts)-1].field("metadata", "resourceVersion")).To(Equal(drifted.ResourceVersion), "the revert's apply is conditional on the drifted ConfigMap")

		By("changing the site: its status apply names the site's version")
		patchSite(ctx, ns, "site", `{"spec":{"pages":{"index.html":"v2"}}}`)
		Eventually(ctx, siteReady(ctx, ns, "site")).WithTimeout(time.Minute).Should(Succeed())
		statuses := log.sent(http.MethodPatch, "/namespaces/"+ns+"/staticsites/site/status")
		Expect(statuses).NotTo(BeEmpty())
		for _, w := range statuses {
			Expect(w.field("metadata", "resourceVersion")).NotTo(BeEmpty(), "a status apply without a precondition: %v", w.body)
		}

		By("declaring a PodDisruptionBudget, then no more: its prune is conditional on its UID and version")
		patchSite(ctx, ns, "site", `{"spec":{"minAvailable":1}}`)
		Eventually(ctx, func() error {
			_, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "site", metav1.GetOptions{})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		patchSite(ctx, ns, "site", `{"spec":{"minAvailable":null}}`)
		Eventually(ctx, func() []sentWrite { return log.sent(http.MethodDelete, "/namespaces/"+ns+"/poddisruptionbudgets/site") }).
			WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		prune := log.sent(http.MethodDelete, "/namespaces/"+ns+"/poddisruptionbudgets/site")[0]
		Expect(prune.field("preconditions", "resourceVersion")).NotTo(BeEmpty(), "the prune's preconditions: %v", prune.body)
		Expect(prune.field("preconditions", "uid")).NotTo(BeEmpty(), "the prune's preconditions: %v", prune.body)
	}, SpecTimeout(3*time.Minute))

	// The status computed from a parent that changed meanwhile is refused
	// (its precondition); the reconcile fails and is retried, rather than
	// dropping the status as if the parent were gone. The controller sees
	// generation changes of sites only, the parent's change here is a
	// label, and the reconcile writes no child: without the retry nothing
	// would reconcile the site again.
	It("retries a status refused because the parent changed since it was read", func(ctx SpecContext) {
		ring := "status-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		leases := newNamespace(ctx)
		// The status names the phase of the spec (set by the test) and
		// the site's label: a reconcile in a new phase writes a new status.
		var armed atomic.Bool
		var phase atomic.Value
		phase.Store("p0")
		reached, release := make(chan struct{}), make(chan struct{})
		r := declarative.Func[*v1alpha1.StaticSite](func(ctx context.Context, s *v1alpha1.StaticSite) (declarative.State, error) {
			if armed.CompareAndSwap(true, false) {
				close(reached)
				<-release
			}
			st, err := site.Desired(ctx, s)
			status := st.Status.(v1alpha1.StaticSiteStatus)
			status.URL = phase.Load().(string) + ":" + s.Labels["stamp"]
			st.Status = status
			return st, err
		})
		opts := ringSites(ring)
		opts.Logger = GinkgoLogr
		opts.Sharding = sharding.Options{
			Ring:  ring,
			Lease: lease.Options{Namespace: leases, Identity: "a", Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
		}
		mgr, err := framework.NewManager(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		d, err := declarative.New(mgr, r, declarative.Options{ChildKinds: site.Children()})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{Sharded: true}).
			WithPredicates(framework.GenerationChanged[*v1alpha1.StaticSite]).Complete(d)).To(Succeed())
		a := &siteMember{mgr: mgr, run: startManager(ctx, mgr)}
		Eventually(ctx, a.serving).WithTimeout(30*time.Second).Should(HaveLen(32), "a serves every bucket")
		_, nss := siteNamespaces(ctx, ring, 1, a)
		ns := nss[0]
		Eventually(ctx, siteReady(ctx, ns, "site")).WithTimeout(time.Minute).Should(Succeed())
		url := func() (string, error) {
			s, err := getSite(ctx, ns, "site")
			if err != nil {
				return "", err
			}
			return s.Status.URL, nil
		}
		Eventually(ctx, url).WithTimeout(30 * time.Second).Should(Equal("p0:"))

		By("a child's change reconciles the site, which changes while the reconcile works")
		phase.Store("p1")
		armed.Store(true)
		patchAs(ctx, corev1.SchemeGroupVersion.WithResource("configmaps"), ns, "site", types.MergePatchType, `{"metadata":{"annotations":{"touched":"by someone else"}}}`)
		Eventually(ctx, reached).WithTimeout(30 * time.Second).Should(BeClosed())
		patchSiteLabels(ctx, ns, "site", `{"metadata":{"labels":{"stamp":"2"}}}`)
		close(release)
		Eventually(ctx, url).WithTimeout(30*time.Second).Should(Equal("p1:2"), "the site's status was computed again from the site as it is now")
	}, SpecTimeout(3*time.Minute))
})
