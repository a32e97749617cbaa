package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/object"
)

// ErrCrashed is the error of a write sent by a client identity after its
// crash (see Server.CrashAfter): the request got no answer, as if its
// process had been killed.
var ErrCrashed = errors.New("fake: the client's identity crashed")

// Request is a request for one of the server's resources, as an
// Interceptor sees it.
type Request struct {
	// Identity is the identity of the Config the request came through (see
	// Server.ConfigAs).
	Identity string
	// Verb is the API server's verb: get, list, watch, create, update,
	// patch, delete or deletecollection.
	Verb string
	// Kind is the kind of the resource; Namespace, Name and Subresource
	// are empty when the request names none. A create's Name is the
	// name in its body (empty with generateName).
	Kind                         schema.GroupVersionKind
	Namespace, Name, Subresource string
}

// IsWrite reports whether the request may change an object: a create,
// update, patch, delete or deletecollection.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (r Request) String() string {
	s := r.Verb + " " + r.Kind.GroupVersion().String() + " " + r.Kind.Kind
	switch {
	case r.Namespace != "" && r.Name != "":
		s += " " + r.Namespace + "/" + r.Name
	case r.Namespace != "":
		s += " in " + r.Namespace
	case r.Name != "":
		s += " " + r.Name
	}
	if r.Subresource != "" {
		s += " (" + r.Subresource + ")"
	}
	return s
}

// Interceptor sees each request for a resource before the server serves
// it (discovery is not intercepted). It either calls serve, which has the
// server answer the request and returns the answer's status code (for a
// watch, once the stream has ended), and returns nil; or it answers the
// request itself by returning an error without calling serve: an API
// status error (apierrors.NewConflict, apierrors.NewInternalError, ...)
// answers with its code and reason, and any other error with 500 Internal
// Server Error naming the request. An error returned after serve was
// called is dropped (the answer is already sent). Interceptors are called
// concurrently, one call per request.
type Interceptor func(req Request, serve func() (code int)) error

// faults holds the hooks of Intercept and CrashAfter.
type faults struct {
	mu sync.Mutex
	// intercept is the Interceptor; mu guards it and the fields below.
	intercept Interceptor
	// crashes are the armed and fired crashes by identity.
	crashes map[string]*crash
}

// crash is one identity's crash: fired is closed once the identity has
// committed after writes.
type crash struct {
	// mu serialises the identity's writes while the crash is armed, so that
	// no write commits after the after-th.
	mu        sync.Mutex
	after     int
	committed int
	fired     chan struct{}
}

func (c *crash) hasFired() bool {
	select {
	case <-c.fired:
		return true
	default:
		return false
	}
}

// Intercept has f see every later request for a resource (see
// Interceptor), replacing the previous Interceptor; nil removes it.
func (s *Server) Intercept(f Interceptor) {
	s.faults.mu.Lock()
	s.faults.intercept = f
	s.faults.mu.Unlock()
}

// CrashAfter crashes the client identity (see ConfigAs) once the server
// has committed writes more of its writes (a write is committed when it is
// answered with success): every later write of the identity fails with an
// error wrapping ErrCrashed, with no answer and no effect, as if its
// process had been killed (kill -9) right after the writes-th write. Reads
// and watches are not refused: a crashed process makes none, and its
// watches end when its caller cancels them. The returned channel is closed
// when the crash happens; writes 0 crashes the identity at once. Calling
// CrashAfter again for the identity replaces a crash that has not happened
// yet, and returns the same closed channel once it has (a crash is
// forever).
func (s *Server) CrashAfter(identity string, writes int) <-chan struct{} {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.crashes == nil {
		s.faults.crashes = map[string]*crash{}
	}
	if c, ok := s.faults.crashes[identity]; ok && c.hasFired() {
		return c.fired
	}
	c := &crash{after: writes, fired: make(chan struct{})}
	if writes <= 0 {
		close(c.fired)
	}
	s.faults.crashes[identity] = c
	return c.fired
}

// identityKey is the context key of a request's client identity.
type identityKey struct{}

func identityOf(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

// lockWrite locks mu for the write of request r, whose changes are then
// recorded as the identity's; the returned function unlocks it.
func (s *Server) lockWrite(r *http.Request) (unlock func()) {
	s.mu.Lock()
	s.writer = identityOf(r.Context())
	return func() {
		s.writer = ""
		s.mu.Unlock()
	}
}

// verbOf returns the API server's verb for a request for q.
func verbOf(r *http.Request, q request) string {
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.name != "":
			return "get"
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if q.name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return r.Method
}

// serveFaulty serves the request for q through the fault hooks: a crashed
// identity's write gets no answer, the Interceptor may answer instead of
// the server, and a write that succeeds counts towards its identity's
// crash.
func (s *Server) serveFaulty(w http.ResponseWriter, r *http.Request, q request) {
	req := Request{Identity: identityOf(r.Context()), Verb: verbOf(r, q), Kind: q.kind.gvk, Namespace: q.ns, Name: q.name, Subresource: q.sub}
	if req.Verb == "create" && req.Name == "" {
		req.Name = s.nameInBody(r, q)
	}
	s.faults.mu.Lock()
	intercept, c := s.faults.intercept, s.faults.crashes[req.Identity]
	s.faults.mu.Unlock()
	if c != nil && req.IsWrite() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.hasFired() {
			if fw, ok := w.(*responseWriter); ok {
				fw.fail(fmt.Errorf("%s by %q: %w after %d writes", req, req.Identity, ErrCrashed, c.committed))
				return
			}
			s.writeError(w, r, &q, fmt.Errorf("%s by %q: %w after %d writes", req, req.Identity, ErrCrashed, c.committed))
			return
		}
	}
	rec := &codeRecorder{ResponseWriter: w}
	serve := func() int {
		s.serveResource(rec, r, q)
		return rec.status()
	}
	if intercept == nil {
		serve()
	} else if err := intercept(req, serve); err != nil && !rec.wrote {
		s.writeError(w, r, &q, err)
		return
	}
	if c != nil && req.IsWrite() && rec.status() < 300 {
		if c.committed++; c.committed == c.after {
			close(c.fired)
		}
	}
}

// nameInBody returns the name of the object in the body of r, a create,
// and leaves the body to be read again; "" if it has none or cannot be
// decoded (the create then fails on it).
func (s *Server) nameInBody(r *http.Request, q request) string {
	if r.Body == nil {
		return ""
	}
	data, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	into, err := s.newObject(q.kind)
	if err != nil {
		return ""
	}
	got, _, err := s.codecs.UniversalDeserializer().Decode(data, &q.kind.gvk, into)
	if err != nil {
		return ""
	}
	if obj, ok := got.(object.Object); ok {
		return obj.GetName()
	}
	return ""
}

// codeRecorder records the status code a handler answers with.
type codeRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *codeRecorder) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeRecorder) Write(p []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes a watch's events on.
func (w *codeRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *codeRecorder) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

// LagWatches makes the watches of the client identity (see ConfigAs) hold
// back up to events of their events: each watch stream sends an event
// only once events later ones are waiting behind it, so its reader sees
// the server's changes late, in order, by at most that many events of the
// stream: stale reads, as from a cache whose watch lags. A change the
// identity made itself is sent at once, with every event before it, so the
// identity's read-your-writes waits end. LagWatches(identity, 0) releases
// every held event and ends the lag. The lag applies to the events of
// watches already open and opened later; a watch's initial list of
// current objects is never held.
func (s *Server) LagWatches(identity string, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if events <= 0 {
		delete(s.lag, identity)
	} else {
		s.lag[identity] = events
	}
	close(s.changed) // wake every watch to apply the new lag
	s.changed = make(chan struct{})
}
