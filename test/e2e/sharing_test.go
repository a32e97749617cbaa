package e2e_test

import (
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
)

// podRequests counts the read requests a client makes for Pods, by kind. It
// is shared by every countingTransport built from one rest.Config: client-go
// calls the config's WrapTransport once per HTTP client, and a Manager builds
// more than one.
type podRequests struct {
	mu sync.Mutex
	// mu guards the counts below.
	// lists are GETs without watch=true: a plain LIST.
	lists int
	// watches are GETs with watch=true and no sendInitialEvents=true: a
	// plain WATCH from a resource version.
	watches int
	// watchLists are GETs with watch=true and sendInitialEvents=true: the
	// streaming list ("watch-list") client-go uses by default since v0.35,
	// which lists and then keeps watching over one request.
	watchLists int
}

type podRequestCounts struct{ Lists, Watches, WatchLists int }

func (p *podRequests) counts() podRequestCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return podRequestCounts{Lists: p.lists, Watches: p.watches, WatchLists: p.watchLists}
}

// countingTransport counts Pod reads into counts and passes every request on.
type countingTransport struct {
	next   http.RoundTripper
	counts *podRequests
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Namespaced (/api/v1/namespaces/NS/pods) and cluster-wide (/api/v1/pods)
	// collection reads both end in /pods; reads of one pod do not.
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") {
		q := req.URL.Query()
		watch := q.Get("watch") == "true" || q.Get("watch") == "1"
		t.counts.mu.Lock()
		switch {
		case watch && q.Get("sendInitialEvents") == "true":
			t.counts.watchLists++
		case watch:
			t.counts.watches++
		default:
			t.counts.lists++
		}
		t.counts.mu.Unlock()
	}
	return t.next.RoundTrip(req)
}

var _ = Describe("the shared cache", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("serves two controllers of one kind from one informer: one list and one watch", func(ctx SpecContext) {
		counts := &podRequests{}
		counted := rest.CopyConfig(cfg)
		counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &countingTransport{next: rt, counts: counts}
		})
		mgr, err := framework.NewManager(counted, managerOptions(ns, framework.Options{}))
		Expect(err).NotTo(HaveOccurred())

		first, second := newRecorder(), newRecorder()
		Expect(framework.NewBuilder[*corev1.Pod](mgr, "pods-first", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(first))).To(Succeed())
		Expect(framework.NewBuilder[*corev1.Pod](mgr, "pods-second", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(second))).To(Succeed())
		startManager(ctx, mgr)

		_, err = kube.CoreV1().Pods(ns).Create(ctx, newPod(ns, "shared"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, first.count(key(ns, "shared"))).Should(BeNumerically(">=", 1), "first controller reconciled the pod")
		Eventually(ctx, second.count(key(ns, "shared"))).Should(BeNumerically(">=", 1), "second controller reconciled the pod")

		// One informer makes exactly one initial request (a LIST or a
		// streaming list) and keeps exactly one watch open; a second informer
		// would double both. client-go v0.37 streams the initial list by
		// default (feature WatchListClient), and this kube-apiserver serves
		// it: the informer's only request is then a WATCH with
		// sendInitialEvents=true, which delivers the initial objects and goes
		// on watching. With streaming turned off
		// (KUBE_FEATURE_WatchListClient=false) it is one LIST, then one WATCH
		// from the list's resource version. The counts are checked for a
		// while, so that late duplicates are caught too.
		oneInformer := Or(
			Equal(podRequestCounts{WatchLists: 1}),        // streaming list, then the same request watches
			Equal(podRequestCounts{Lists: 1, Watches: 1}), // LIST, then WATCH
		)
		Consistently(ctx, counts.counts).WithTimeout(time.Second).Should(oneInformer)
		GinkgoWriter.Printf("pod requests: %+v\n", counts.counts())

		// The cache agrees: one Pod informer, listed once.
		pods, err := informers.For[*corev1.Pod](mgr.Cache(), informers.Selection{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Relists()).To(BeEquivalentTo(1))
		var podInformers []string
		for _, st := range mgr.Cache().Stats() {
			if st.Kind.Kind == "Pod" {
				podInformers = append(podInformers, st.Description)
			}
		}
		Expect(podInformers).To(HaveLen(1))
	}, SpecTimeout(time.Minute))
})
