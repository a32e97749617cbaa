package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// partition plays a network partition between a client and the API server
// for the reads of one resource: cut ends the open watches of the resource
// and holds every new read of it until heal. Heal answers the watches it held
// with 410 Gone, as an API server does when a watch asks for history it no
// longer has, so the client must list again; the lists it held go through.
//
// One partition is shared by every transport built from one rest.Config
// (client-go calls WrapTransport once per HTTP client).
type partition struct {
	// resource is the last path element of the collection, such as "configmaps".
	resource string

	mu sync.Mutex
	// healed is non-nil while the partition is cut, and closed by heal;
	// watches holds the open watch responses. mu guards both.
	healed  chan struct{}
	watches map[*cuttableBody]struct{}
}

func newPartition(resource string) *partition {
	return &partition{resource: resource, watches: map[*cuttableBody]struct{}{}}
}

// wrap returns a copy of c whose requests go through p.
func (p *partition) wrap(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &partitionTransport{next: rt, p: p} })
	return c
}

// cut ends every open watch and holds new reads until heal.
func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
	for b := range p.watches {
		b.cut()
	}
}

// heal lets held and new reads through. It may be called more than once.
func (p *partition) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
}

type partitionTransport struct {
	next http.RoundTripper
	p    *partition
}

func (t *partitionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+t.p.resource) {
		return t.next.RoundTrip(req)
	}
	q := req.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	streamingList := watch && q.Get("sendInitialEvents") == "true"

	t.p.mu.Lock()
	healed := t.p.healed
	t.p.mu.Unlock()
	if healed != nil {
		select {
		case <-healed:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		if watch && !streamingList {
			return gone(req), nil
		}
	}

	resp, err := t.next.RoundTrip(req)
	if err != nil || !watch || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body := &cuttableBody{ReadCloser: resp.Body, p: t.p}
	t.p.mu.Lock()
	t.p.watches[body] = struct{}{}
	t.p.mu.Unlock()
	resp.Body = body
	return resp, nil
}

// gone is the API server's answer to a watch from a resource version older
// than the history it keeps.
func gone(req *http.Request) *http.Response {
	const status = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"too old resource version: the partition lost the history","reason":"Expired","code":410}`
	return &http.Response{
		Status:     "410 Gone",
		StatusCode: http.StatusGone,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(status)),
		ContentLength: int64(len(status)),
		Request:       req,
	}
}

// cuttableBody is a watch response that cut ends: the client reads a clean
// end of stream, as when the server or a proxy closes a watch.
type cuttableBody struct {
	io.ReadCloser
	p      *partition
	isCut  atomic.Bool
	closed sync.Once
}

func (b *cuttableBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err != nil && b.isCut.Load() {
		return n, io.EOF
	}
	return n, err
}

// cut ends the stream; the caller holds p.mu.
func (b *cuttableBody) cut() {
	b.isCut.Store(true)
	_ = b.ReadCloser.Close() // unblocks a pending Read
}

func (b *cuttableBody) Close() error {
	b.closed.Do(func() {
		b.p.mu.Lock()
		delete(b.p.watches, b)
		b.p.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

var _ = Describe("a watch drop", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reconciles every object after a watch drop, deletions included", func(ctx SpecContext) {
		p := newPartition("configmaps")
		DeferCleanup(p.heal)
		mgr, err := framework.NewManager(p.wrap(cfg), managerOptions(ns, framework.Options{}))
		Expect(err).NotTo(HaveOccurred())
		r := &deletionRecorder{seen: map[reconcile.Request][]string{}}
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "partitioned", framework.ControllerOptions{}).
			Complete(r)).To(Succeed())
		startManager(ctx, mgr)

		changed, deleted, added := key(ns, "changed"), key(ns, "deleted"), key(ns, "added")
		cm := createConfigMap(ctx, ns, changed.Name, map[string]string{"v": "1"})
		createConfigMap(ctx, ns, deleted.Name, map[string]string{"v": "1"})
		Eventually(ctx, r.lastSeen(changed)).Should(Equal("1"))
		Eventually(ctx, r.lastSeen(deleted)).Should(Equal("1"))
		cmInformer, err := informers.For[*corev1.ConfigMap](mgr.Cache(), informers.Selection{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmInformer.Relists()).To(BeEquivalentTo(1))

		By("cutting the watch, then changing, deleting and creating objects")
		p.cut()
		cms := kube.CoreV1().ConfigMaps(ns)
		cm.Data["v"] = "2"
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cms.Delete(ctx, deleted.Name, metav1.DeleteOptions{})).To(Succeed())
		createConfigMap(ctx, ns, added.Name, map[string]string{"v": "1"})
		// The controller is really blind: none of it is seen.
		Consistently(ctx, func(g Gomega) {
			g.Expect(r.lastSeen(changed)()).To(Equal("1"))
			g.Expect(r.lastSeen(added)()).To(BeEmpty())
			g.Expect(r.deleted()).To(BeEmpty())
		}).WithTimeout(500 * time.Millisecond).Should(Succeed())

		// client-go retries a cut watch in one of two ways, and both must end
		// in a fresh list: a watch that lived over a second resumes from its
		// resource version (held, then answered 410 Gone on heal); a
		// shorter one counts as broken and the reflector lists again at once
		// (held, then let through on heal).
		By("healing: the watch cannot resume, so the informer lists again")
		p.heal()
		Eventually(ctx, r.lastSeen(changed)).WithTimeout(30 * time.Second).Should(Equal("2"))
		Eventually(ctx, r.lastSeen(added)).Should(Equal("1"))
		Eventually(ctx, r.deleted).Should(HaveLen(1))
		tomb := r.deleted()[0]
		Expect(tomb.Request).To(Equal(deleted))
		// The deletion was missed: the tombstone holds the last state the
		// cache saw before the drop.
		Expect(tomb.Last).NotTo(BeNil())
		Expect(tomb.Last.Data).To(HaveKeyWithValue("v", "1"))
		Expect(cmInformer.Relists()).To(BeNumerically(">=", 2), "the informer resumed its watch instead of listing again")
		Expect(mgr.Cache().Health()).To(Succeed())
	}, SpecTimeout(time.Minute))
})
