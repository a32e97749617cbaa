package introspect

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// Path is where the endpoint is served: the page at Path, the JSON API
// under Path+"api/" (state, object, key, queue, notconverged).
const Path = "/debug/converge/"

// Bounds of the debug endpoint's answers.
const (
	defaultQueuePage = 100
	maxQueuePage     = 500
	maxNameLength    = 253 // a DNS subdomain, the longest object name
)

// Provider is what the endpoint reads of a manager. Its methods are
// called from the goroutines serving requests, concurrently.
type Provider interface {
	// State returns the manager at a glance at now.
	State(now time.Time) State
	// Controllers returns the manager's controllers.
	Controllers() []Controller
	// Informers returns the informers of the manager's cache.
	Informers() []informers.InformerStats
}

// Controller is what the endpoint reads of one controller.
type Controller interface {
	Name() string
	// Kind is the kind the controller reconciles; Watches the kinds of
	// its other sources.
	Kind() schema.GroupVersionKind
	Watches() []schema.GroupVersionKind
	// Key returns where req stands in the controller at now.
	Key(req reconcile.Request, now time.Time) KeyStatus
	// Queue returns at most limit of the queued keys, from offset, in the
	// order the workers take them.
	Queue(offset, limit int) QueuePage
	// Unconverged returns the keys that may not be converged (their last
	// reconcile failed or noted a Blocker, or a worker holds them), each
	// with when it last moved, newest first.
	Unconverged() []Moved
}

// Moved is a key and when it last moved: when its last reconcile ended,
// or when the one in flight began.
type Moved struct {
	Key reconcile.Request
	At  time.Time
}

// handler serves the page and its JSON API of one Provider.
type handler struct {
	p   Provider
	log logr.Logger
}

// Handler returns the handler of the page and its JSON API under Path,
// reading p; it logs to log the pages it fails to render. Authentication
// and authorization are the caller's.
func Handler(p Provider, log logr.Logger) http.Handler {
	m := handler{p: p, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"{$}", m.servePage)
	mux.HandleFunc("GET "+Path+"static/{file}", serveStatic)
	mux.HandleFunc("GET "+Path+"api/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.p.State(time.Now()))
	})
	mux.HandleFunc("GET "+Path+"api/key", m.serveKey)
	mux.HandleFunc("GET "+Path+"api/object", m.serveObject)
	mux.HandleFunc("GET "+Path+"api/queue", m.serveQueue)
	mux.HandleFunc("GET "+Path+"api/notconverged", m.serveNotConverged)
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "the debug endpoint is read-only: use GET")
			return
		}
		writeError(w, http.StatusNotFound, "no such debug path "+r.URL.Path+": see "+Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Nothing outside the process is loaded; nothing may frame the page.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // a failed write is the client's hang-up
}

// debugError is the body of every failed API request.
type debugError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, debugError{Error: msg})
}

// keyParams reads and checks cluster ("" for the manager's own), namespace
// and name.
func keyParams(r *http.Request) (reconcile.Request, error) {
	q := r.URL.Query()
	req := reconcile.Request{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Name: q.Get("name")}
	switch {
	case req.Name == "":
		return req, fmt.Errorf("the name parameter is required (and namespace, for a namespaced object)")
	case len(req.Name) > maxNameLength || len(req.Namespace) > maxNameLength || len(req.Cluster) > maxNameLength:
		return req, fmt.Errorf("cluster, namespace and name must be at most %d bytes", maxNameLength)
	}
	return req, nil
}

func (m handler) controllerNamed(name string) Controller {
	for _, c := range m.p.Controllers() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// serveKey answers /api/key?controller=C&namespace=NS&name=N[&cluster=C].
func (m handler) serveKey(w http.ResponseWriter, r *http.Request) {
	req, err := keyParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.URL.Query().Get("controller")
	c := m.controllerNamed(name)
	if c == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no controller named %q in this manager", name))
		return
	}
	writeJSON(w, http.StatusOK, c.Key(req, time.Now()))
}

// serveObject answers /api/object?kind=K&namespace=NS&name=N[&cluster=C].
func (m handler) serveObject(w http.ResponseWriter, r *http.Request) {
	req, err := keyParams(r)
	kind := r.URL.Query().Get("kind")
	if err == nil && kind == "" {
		err = fmt.Errorf("the kind parameter is required (Deployment, deployment.apps or \"apps/v1 Deployment\")")
	}
	if err == nil && len(kind) > maxNameLength {
		err = fmt.Errorf("kind must be at most %d bytes", maxNameLength)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := time.Now()
	s := ObjectStatus{Kind: kind, Cluster: req.Cluster, Namespace: req.Namespace, Name: req.Name, Controllers: []KeyStatus{}, Informers: []informers.InformerStats{}}
	for _, c := range m.p.Controllers() {
		if matchesKind(kind, c.Kind()) {
			s.Controllers = append(s.Controllers, c.Key(req, now))
		}
	}
	for _, st := range m.p.Informers() {
		if req.Cluster == "" && matchesKind(kind, st.Kind) { // the manager's own cache's
			s.Informers = append(s.Informers, st)
		}
	}
	if len(s.Controllers) == 0 {
		for _, c := range m.p.Controllers() {
			if k := KindOf(c.Kind()); !slices.Contains(s.Kinds, k) {
				s.Kinds = append(s.Kinds, k)
			}
			if slices.ContainsFunc(c.Watches(), func(gvk schema.GroupVersionKind) bool { return matchesKind(kind, gvk) }) {
				s.WatchedBy = append(s.WatchedBy, Watcher{Controller: c.Name(), Kind: KindOf(c.Kind())})
			}
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// serveQueue answers /api/queue?controller=C&offset=O&limit=L.
func (m handler) serveQueue(w http.ResponseWriter, r *http.Request) {
	if c, offset, limit, ok := m.pageParams(w, r); ok {
		writeJSON(w, http.StatusOK, c.Queue(offset, limit))
	}
}

// serveNotConverged answers /api/notconverged?controller=C&offset=O&limit=L.
func (m handler) serveNotConverged(w http.ResponseWriter, r *http.Request) {
	if c, offset, limit, ok := m.pageParams(w, r); ok {
		writeJSON(w, http.StatusOK, notConverged(c, offset, limit, time.Now()))
	}
}

// pageParams reads and checks the controller, offset and limit of a paged
// request; it answers the request itself and returns false when they are
// not right.
func (m handler) pageParams(w http.ResponseWriter, r *http.Request) (c Controller, offset, limit int, ok bool) {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0, "offset")
	limit, err2 := intParam(q.Get("limit"), defaultQueuePage, "limit")
	switch {
	case err != nil:
	case err2 != nil:
		err = err2
	case limit < 1 || limit > maxQueuePage:
		err = fmt.Errorf("limit must be between 1 and %d, got %d", maxQueuePage, limit)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, 0, 0, false
	}
	name := q.Get("controller")
	if c = m.controllerNamed(name); c == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no controller named %q in this manager", name))
		return nil, 0, 0, false
	}
	return c, offset, limit, true
}

func intParam(s string, def int, what string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %q", what, s)
	}
	return n, nil
}
