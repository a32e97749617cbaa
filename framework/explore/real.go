package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/faultproxy"
)

// expireWait bounds the wait, after an Expire fault, for an informer to
// list again; kube-apiserver with its watch cache never makes it.
const expireWait = 5 * time.Second

// cleanupTimeout bounds the wait for what a schedule created to be gone.
const cleanupTimeout = time.Minute

// realPlane is the test control plane of Options.Envtest, for one
// schedule: the managers reach kube-apiserver through a proxy of the
// schedule's, which Hold and Expire hold and break; every client but the
// invariants' sends its requests through a tripper, which calls
// schedule.intercept.
type realPlane struct {
	s      *schedule
	env    *envtest.Environment
	admin  *rest.Config
	proxy  *faultproxy.Proxy
	m      meta.RESTMapper
	dyn    *dynamic.DynamicClient
	decode runtime.Decoder

	mu      sync.Mutex
	crashed map[string]bool
	// created are the objects the scenario and the managers created
	// (answered 201), deleted after the schedule.
	created []objectRef
	// up is closed while kube-apiserver runs; a Restart fault replaces
	// it until kube-apiserver is ready again, and restartErr says why it
	// did not come back.
	up         chan struct{}
	restartErr error
	// killedAt and upAt are when a Restart fault last killed
	// kube-apiserver and when it was ready again (zero until it is).
	killedAt, upAt time.Time
	// reads are the managers' last list or watch request of each kind
	// (see noteRead).
	reads map[schema.GroupVersionKind]readNote

	// killMu is held by the scenario's writes (read lock) and by kill,
	// so that kube-apiserver never dies under a write of the scenario.
	killMu sync.RWMutex

	// Owned by the goroutine running the schedule: the pending Expire
	// fault (-1 if none), when its connections were broken, and how often
	// the manager's informers had listed before.
	expireFault   int
	expiredAt     time.Time
	relistsBefore int64

	// afterKill, when set (by tests, from afterKillHook), is called with
	// awaitUp's channel once a Restart fault has killed kube-apiserver,
	// before its write is answered.
	afterKill func(up <-chan struct{})
}

// afterKillHook is the afterKill of the next realPlanes (a test's).
var afterKillHook func(up <-chan struct{})

type objectRef struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func newRealPlane(ctx context.Context, s *schedule) (*realPlane, error) {
	env := s.opts.Envtest
	admin := env.Config()
	if admin == nil {
		return nil, fmt.Errorf("explore: Options.Envtest: %w", envtest.ErrNotStarted)
	}
	u, err := url.Parse(admin.Host)
	if err != nil {
		return nil, fmt.Errorf("explore: Options.Envtest: %w", err)
	}
	p := &realPlane{s: s, env: env, admin: admin, crashed: map[string]bool{}, expireFault: -1, up: make(chan struct{}), afterKill: afterKillHook}
	close(p.up)
	codecs := serializer.NewCodecFactory(s.opts.Scheme, serializer.WithSerializer(cbor.NewSerializerInfo))
	p.decode = codecs.UniversalDeserializer()
	if p.m, err = informers.NewRESTMapper(admin, nil); err != nil {
		return nil, fmt.Errorf("explore: discovery on the test control plane: %w", err)
	}
	if p.dyn, err = dynamic.NewForConfig(admin); err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	if p.proxy, err = faultproxy.New(u.Host); err != nil {
		return nil, fmt.Errorf("explore: proxy to kube-apiserver: %w", err)
	}
	_ = ctx
	return p, nil
}

// config: the managers go through the proxy; the invariants straight to
// kube-apiserver, unintercepted. The scenario's and the invariants'
// requests wait while a Restart has kube-apiserver down: they are not
// the controllers under test.
func (p *realPlane) config(identity string) *rest.Config {
	cfg := rest.CopyConfig(p.admin)
	if identity != scenarioIdentity && identity != invariantIdentity {
		cfg.Host = "https://" + p.proxy.Addr()
	}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &tripper{p: p, identity: identity, next: next}
	})
	return cfg
}

func (p *realPlane) mapper() meta.RESTMapper { return p.m }

// setUp creates Options.Objects.
func (p *realPlane) setUp(ctx context.Context, _ *client.Client) error {
	for _, obj := range p.s.opts.Objects {
		gvk, err := client.KindOf(p.s.opts.Scheme, obj)
		if err != nil {
			return fmt.Errorf("explore: Options.Objects: %w", err)
		}
		m, err := p.m.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("explore: Options.Objects: %w", err)
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return fmt.Errorf("explore: Options.Objects: %s: %w", describe(obj), err)
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetGroupVersionKind(gvk)
		u.SetResourceVersion("")
		if _, err := p.resource(m, obj.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("explore: Options.Objects: create %s: %w", describe(obj), err)
		}
		p.noteCreated(objectRef{gvk, obj.GetNamespace(), obj.GetName()})
	}
	return nil
}

func (p *realPlane) resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return p.dyn.Resource(m.Resource).Namespace(namespace)
	}
	return p.dyn.Resource(m.Resource)
}

func (p *realPlane) crash(identity string) {
	p.mu.Lock()
	p.crashed[identity] = true
	p.mu.Unlock()
}

func (p *realPlane) isCrashed(identity string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashed[identity]
}

func (p *realPlane) lag(string, int) {} // Lag is refused with Envtest

// quiet is longer than on the fake: events reach the caches in wall time,
// over loopback TCP.
func (p *realPlane) quiet() time.Duration { return 100 * time.Millisecond }

// caughtUp waits for a restarted kube-apiserver and, after an Expire
// fault, for an informer of the manager to list again (the fault fires
// then), or for expireWait. That every informer watches again is idle's.
func (p *realPlane) caughtUp(r *managerRun) string {
	if p.restarting() {
		return "kube-apiserver is restarting"
	}
	p.mu.Lock()
	err := p.restartErr
	p.mu.Unlock()
	if err != nil {
		return err.Error()
	}
	if p.expireFault < 0 {
		return ""
	}
	if relists(r.mgr) > p.relistsBefore {
		p.s.fire(p.expireFault)
		p.expireFault = -1
		return ""
	}
	if time.Since(p.expiredAt) < expireWait {
		return "the informers have not listed again since their watches expired"
	}
	p.expireFault = -1 // it did not fire
	return ""
}

// kill kills kube-apiserver (a Restart fault), once no write of the
// scenario is in flight, and starts it again in the background.
func (p *realPlane) kill() error {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if err := p.env.KillAPIServer(); err != nil {
		return err
	}
	up := make(chan struct{})
	p.mu.Lock()
	p.up, p.killedAt, p.upAt = up, time.Now(), time.Time{}
	p.mu.Unlock()
	go func() {
		defer close(up)
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		err := p.env.StartAPIServer(ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.restartErr = fmt.Errorf("explore: restarting kube-apiserver: %w", err)
			return
		}
		p.upAt = time.Now()
	}()
	return nil
}

// restartNote says, for a report, when a Restart fault last killed
// kube-apiserver and when it was ready again; "" if none did.
func (p *realPlane) restartNote(now time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ago := func(t time.Time) time.Duration { return now.Sub(t).Round(time.Millisecond) }
	switch {
	case p.killedAt.IsZero():
		return ""
	case p.restartErr != nil:
		return fmt.Sprintf("kube-apiserver, killed by a Restart fault %v ago, did not come back: %v", ago(p.killedAt), p.restartErr)
	case p.upAt.IsZero():
		return fmt.Sprintf("kube-apiserver, killed by a Restart fault %v ago, is not ready again yet", ago(p.killedAt))
	}
	return fmt.Sprintf("kube-apiserver, killed by a Restart fault %v ago, was ready again %v later (%v ago)",
		ago(p.killedAt), p.upAt.Sub(p.killedAt).Round(time.Millisecond), ago(p.upAt))
}

// readNote is a manager's list or watch request and how it ended.
type readNote struct {
	at      time.Time
	watch   bool
	outcome string // the answer's status code, or the error
}

// noteRead notes a list or watch request of the managers (a GET of a
// collection) and its answer.
func (p *realPlane) noteRead(req request, r *http.Request, resp *http.Response, err error) {
	if req.name != "" || r.Method != http.MethodGet {
		return
	}
	n := readNote{at: time.Now(), watch: r.URL.Query().Get("watch") == "true"}
	switch {
	case err != nil:
		n.outcome = err.Error()
	case resp.StatusCode == http.StatusOK && n.watch:
		n.outcome = "200, the stream open"
	default:
		n.outcome = strconv.Itoa(resp.StatusCode)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reads == nil {
		p.reads = map[schema.GroupVersionKind]readNote{}
	}
	p.reads[req.kind] = n
}

// lastRead describes the managers' last list or watch request of kind,
// for a report of an informer that is not watching; "" if none was seen.
func (p *realPlane) lastRead(kind schema.GroupVersionKind) string {
	p.mu.Lock()
	n, ok := p.reads[kind]
	p.mu.Unlock()
	if !ok {
		return ""
	}
	verb := "list"
	if n.watch {
		verb = "watch"
	}
	return fmt.Sprintf("its last %s request was sent %v ago: %s", verb, time.Since(n.at).Round(time.Millisecond), n.outcome)
}

// restarting reports whether a Restart fault's kube-apiserver is not up
// yet.
func (p *realPlane) restarting() bool {
	select {
	case <-p.awaitUp():
		return false
	default:
		return true
	}
}

// awaitUp returns a channel closed while kube-apiserver runs.
func (p *realPlane) awaitUp() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

// hold holds the managers' connection (a Hold fault); release lets it go.
func (p *realPlane) hold()    { p.proxy.SetMode(faultproxy.Hold, 0) }
func (p *realPlane) release() { p.proxy.SetMode(faultproxy.Pass, 0) }

// blind holds the managers' connection while an Expire fault's step is
// applied.
func (p *realPlane) blind() error {
	p.hold()
	return nil
}

// expire compacts etcd's history and breaks the managers' connections:
// their watches resume from a compacted resource version.
func (p *realPlane) expire(ctx context.Context) error {
	if _, err := p.env.CompactEtcd(ctx); err != nil {
		p.release()
		return fmt.Errorf("explore: compacting etcd: %w", err)
	}
	p.proxy.ResetAll()
	p.release()
	p.expiredAt = time.Now()
	return nil
}

func (p *realPlane) noteCreated(ref objectRef) {
	p.mu.Lock()
	p.created = append(p.created, ref)
	p.mu.Unlock()
}

// close brings kube-apiserver back if a Restart left it down, closes the
// proxy and deletes what the schedule created, its finalizers removed,
// waiting until it is gone. Namespaces are left: only
// kube-controller-manager can finish deleting one.
func (p *realPlane) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = p.proxy.Close()
	select {
	case <-p.awaitUp():
	case <-ctx.Done():
		return fmt.Errorf("explore: kube-apiserver did not come back after a restart within %v", cleanupTimeout)
	}
	p.mu.Lock()
	created, restartErr := p.created, p.restartErr
	p.mu.Unlock()
	if restartErr != nil {
		return restartErr
	}
	seen := map[objectRef]bool{}
	var gone []objectRef
	var errs []error
	for i := len(created) - 1; i >= 0; i-- {
		ref := created[i]
		if seen[ref] || ref.gvk.Group == "" && ref.gvk.Kind == "Namespace" {
			continue
		}
		seen[ref] = true
		m, err := p.m.RESTMapping(ref.gvk.GroupKind(), ref.gvk.Version)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res := p.resource(m, ref.namespace)
		_, err = res.Patch(ctx, ref.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			err = res.Delete(ctx, ref.name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", ref.gvk.Kind, ref.namespace, ref.name, err))
			continue
		}
		gone = append(gone, ref)
	}
	for _, ref := range gone {
		m, _ := p.m.RESTMapping(ref.gvk.GroupKind(), ref.gvk.Version)
		res := p.resource(m, ref.namespace)
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := res.Get(ctx, ref.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s is still there %v after its deletion", ref.gvk.Kind, ref.namespace, ref.name, cleanupTimeout))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("explore: deleting what the schedule created: %w", err)
	}
	return nil
}

// tripper intercepts one client identity's requests.
type tripper struct {
	p        *realPlane
	identity string
	next     http.RoundTripper
}

func (t *tripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.identity == scenarioIdentity && r.Method != http.MethodGet {
		// kube-apiserver is not killed under the scenario's write (see kill).
		t.p.killMu.RLock()
		defer t.p.killMu.RUnlock()
	}
	if t.identity == scenarioIdentity || t.identity == invariantIdentity {
		select {
		case <-t.p.awaitUp():
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	if t.identity == invariantIdentity {
		return t.next.RoundTrip(r)
	}
	req, ok := t.p.parse(r)
	if !ok {
		return t.next.RoundTrip(r)
	}
	req.identity = t.identity
	if req.verb == "create" && r.Body != nil {
		// The name is in the body: read it, and send a copy.
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if obj, _, err := t.p.decode.Decode(body, nil, nil); err == nil {
			if m, err := meta.Accessor(obj); err == nil {
				req.name = m.GetName()
			}
		}
	}
	if req.isWrite() && t.p.isCrashed(t.identity) {
		return nil, fmt.Errorf("explore: %s by %s: refused, unanswered: the manager crashed", req, t.identity)
	}
	var (
		resp *http.Response
		err  error
	)
	serve := func() int {
		resp, err = t.next.RoundTrip(r)
		if err != nil {
			return 0
		}
		if resp.StatusCode == http.StatusCreated {
			t.p.noteResponse(req, resp)
		}
		return resp.StatusCode
	}
	if injected := t.p.s.intercept(req, serve); injected != nil {
		if lost := (*lostError)(nil); errors.As(injected, &lost) {
			return nil, injected
		}
		return statusResponse(r, injected), nil
	}
	if t.identity != scenarioIdentity {
		t.p.noteRead(req, r, resp, err)
	}
	return resp, err
}

// noteResponse notes the object a 201 answer created, named by its body.
func (p *realPlane) noteResponse(req request, resp *http.Response) {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	obj, _, err := p.decode.Decode(body, nil, nil)
	if err != nil {
		if req.name != "" { // an apply that created its object
			p.noteCreated(objectRef{req.kind, req.namespace, req.name})
		}
		return
	}
	if m, err := meta.Accessor(obj); err == nil {
		p.noteCreated(objectRef{req.kind, m.GetNamespace(), m.GetName()})
	}
}

// parse reads a request for a resource: /api/v1/… or /apis/<group>/<version>/…,
// then namespaces/<ns>/ if namespaced, <resource>[/<name>[/<subresource>]].
func (p *realPlane) parse(r *http.Request) (request, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return request{}, false
	}
	var q request
	if len(parts) >= 3 && parts[0] == "namespaces" {
		q.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 1 {
		q.name = parts[1]
	}
	if len(parts) > 2 {
		q.subresource = strings.Join(parts[2:], "/")
	}
	kind, err := p.m.KindFor(gv.WithResource(parts[0]))
	if err != nil {
		return request{}, false
	}
	q.kind = kind
	switch r.Method {
	case http.MethodPost:
		q.verb = "create"
	case http.MethodPut:
		q.verb = "update"
	case http.MethodPatch:
		q.verb = "patch"
	case http.MethodDelete:
		q.verb = "delete"
		if q.name == "" {
			q.verb = "deletecollection"
		}
	default:
		q.verb = "get"
	}
	return q, true
}

// statusResponse is the answer a fault gives instead of kube-apiserver:
// err's Status, as JSON.
func statusResponse(r *http.Request, err error) *http.Response {
	var st metav1.Status
	var apiErr apierrors.APIStatus
	if errors.As(err, &apiErr) {
		st = apiErr.Status()
	} else {
		st = apierrors.NewInternalError(err).Status()
	}
	st.APIVersion, st.Kind = "v1", "Status"
	body, _ := json.Marshal(st)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", st.Code, http.StatusText(int(st.Code))),
		StatusCode:    int(st.Code),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}
