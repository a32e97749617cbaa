package framework

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/reconcile"
)

// DebugPath is where the metrics server serves the debug endpoint: the
// page at DebugPath, the JSON API under DebugPath+"api/" (state, object,
// key, queue, notconverged), unless MetricsOptions.DisableDebug is set.
const DebugPath = "/debug/converge/"

// Bounds of the debug endpoint's answers.
const (
	defaultQueuePage = 100
	maxQueuePage     = 500
	maxNameLength    = 253 // a DNS subdomain, the longest object name
)

// debugHandler serves the debug page and its JSON API. Authentication and
// authorization are the caller's (see startServers).
func (m *Manager) debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DebugPath+"{$}", m.servePage)
	mux.HandleFunc("GET "+DebugPath+"static/{file}", serveStatic)
	mux.HandleFunc("GET "+DebugPath+"api/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.debugState(time.Now()))
	})
	mux.HandleFunc("GET "+DebugPath+"api/key", m.serveKey)
	mux.HandleFunc("GET "+DebugPath+"api/object", m.serveObject)
	mux.HandleFunc("GET "+DebugPath+"api/queue", m.serveQueue)
	mux.HandleFunc("GET "+DebugPath+"api/notconverged", m.serveNotConverged)
	mux.HandleFunc(DebugPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "the debug endpoint is read-only: use GET")
			return
		}
		writeError(w, http.StatusNotFound, "no such debug path "+r.URL.Path+": see "+DebugPath)
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

// loopbackOnly admits only requests from a loopback address to a loopback
// host name: the debug endpoint of a plain-HTTP metrics server is not for
// the network (kubectl port-forward connects from loopback), and the Host
// check keeps a web page elsewhere from reading it through DNS rebinding.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackAddr(r.RemoteAddr) || !loopbackHost(r.Host) {
			http.Error(w, "Forbidden: with Metrics.Insecure the debug endpoint is served only to loopback clients on a loopback host name (use kubectl port-forward)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
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

// debugState is the manager at a glance.
func (m *Manager) debugState(now time.Time) DebugState {
	le := m.opts.LeaderElection
	m.mu.Lock()
	s := DebugState{
		Time:     now.UTC(),
		Leader:   LeaderStatus{Election: le.Enabled, Leading: m.leading},
		Webhooks: make([]string, 0, len(m.webhooks)),
	}
	for path := range m.webhooks {
		s.Webhooks = append(s.Webhooks, path)
	}
	m.mu.Unlock()
	slices.Sort(s.Webhooks)
	if st, ok := m.RingStatus(); ok {
		s.Ring = &st
	}
	if le.Enabled {
		s.Leader.Lease, s.Leader.Identity = le.Lease.Namespace+"/"+le.ID, le.Lease.Identity
		if leading := m.isLeader.Load(); leading != nil {
			s.Leader.Leading = s.Leader.Leading && (*leading)()
		}
	}
	cs := m.inspectedControllers()
	s.Controllers = make([]ControllerStatus, 0, len(cs))
	for _, c := range cs {
		s.Controllers = append(s.Controllers, c.status(now))
	}
	s.Informers = informerStatuses(m.cache.Stats())
	return s
}

// keyParams reads and checks namespace and name.
func keyParams(r *http.Request) (reconcile.Request, error) {
	q := r.URL.Query()
	req := reconcile.Request{Namespace: q.Get("namespace"), Name: q.Get("name")}
	switch {
	case req.Name == "":
		return req, fmt.Errorf("the name parameter is required (and namespace, for a namespaced object)")
	case len(req.Name) > maxNameLength || len(req.Namespace) > maxNameLength:
		return req, fmt.Errorf("namespace and name must be at most %d bytes", maxNameLength)
	}
	return req, nil
}

func (m *Manager) controllerNamed(name string) inspectable {
	for _, c := range m.inspectedControllers() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// serveKey answers /api/key?controller=C&namespace=NS&name=N.
func (m *Manager) serveKey(w http.ResponseWriter, r *http.Request) {
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
	writeJSON(w, http.StatusOK, c.keyStatus(req, time.Now()))
}

// serveObject answers /api/object?kind=K&namespace=NS&name=N.
func (m *Manager) serveObject(w http.ResponseWriter, r *http.Request) {
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
	s := ObjectStatus{Kind: kind, Namespace: req.Namespace, Name: req.Name, Controllers: []KeyStatus{}, Informers: []InformerStatus{}}
	for _, c := range m.inspectedControllers() {
		if matchesKind(kind, c.gvk()) {
			s.Controllers = append(s.Controllers, c.keyStatus(req, now))
		}
	}
	for _, st := range informerStatuses(m.cache.Stats()) {
		if matchesKind(kind, kindGVK(st.Kind)) {
			s.Informers = append(s.Informers, st)
		}
	}
	if len(s.Controllers) == 0 {
		for _, c := range m.inspectedControllers() {
			if k := kindOf(c.gvk()); !slices.Contains(s.Kinds, k) {
				s.Kinds = append(s.Kinds, k)
			}
			if slices.ContainsFunc(c.watches(), func(gvk schema.GroupVersionKind) bool { return matchesKind(kind, gvk) }) {
				s.WatchedBy = append(s.WatchedBy, Watcher{Controller: c.Name(), Kind: kindOf(c.gvk())})
			}
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// serveQueue answers /api/queue?controller=C&offset=O&limit=L.
func (m *Manager) serveQueue(w http.ResponseWriter, r *http.Request) {
	if c, offset, limit, ok := m.pageParams(w, r); ok {
		writeJSON(w, http.StatusOK, c.queuePage(offset, limit))
	}
}

// serveNotConverged answers /api/notconverged?controller=C&offset=O&limit=L.
func (m *Manager) serveNotConverged(w http.ResponseWriter, r *http.Request) {
	if c, offset, limit, ok := m.pageParams(w, r); ok {
		writeJSON(w, http.StatusOK, c.notConverged(offset, limit, time.Now()))
	}
}

// pageParams reads and checks the controller, offset and limit of a paged
// request; it answers the request itself and returns false when they are
// not right.
func (m *Manager) pageParams(w http.ResponseWriter, r *http.Request) (c inspectable, offset, limit int, ok bool) {
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
