package framework

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Check is a named health or readiness check: nil means healthy.
type Check func(req *http.Request) error

// AddHealthCheck adds a check to /healthz (liveness: failing it restarts the
// pod). The manager's own liveness check always passes while it serves.
func (m *Manager) AddHealthCheck(name string, check Check) error {
	return m.addCheck(m.healthChecks, "health", name, check)
}

// AddReadyCheck adds a check to /readyz (readiness). The manager's own
// readiness check passes once every cache has synced and while every
// informer can list and watch; its failure names the kind and the cause.
func (m *Manager) AddReadyCheck(name string, check Check) error {
	return m.addCheck(m.readyChecks, "ready", name, check)
}

func (m *Manager) addCheck(checks map[string]Check, kind, name string, check Check) error {
	if name == "" || check == nil {
		return fmt.Errorf("framework: %s check needs a name and a function (got %q)", kind, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := checks[name]; dup {
		return fmt.Errorf("framework: a %s check named %q already exists", kind, name)
	}
	checks[name] = check
	return nil
}

// cacheReady is the built-in readiness check.
func (m *Manager) cacheReady(*http.Request) error {
	if !m.synced.Load() {
		if err := m.cache.Health(); err != nil {
			return err
		}
		return errors.New("caches have not synced yet")
	}
	return m.cache.Health()
}

// probeHandler serves a set of checks the way kube-apiserver's own /healthz
// does: 200 "ok", or 500 listing each check; ?verbose lists them either way.
func (m *Manager) probeHandler(checks map[string]Check, builtin string, builtinCheck Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		names := make([]string, 0, len(checks)+1)
		all := make(map[string]Check, len(checks)+1)
		for n, c := range checks {
			names = append(names, n)
			all[n] = c
		}
		m.mu.Unlock()
		if builtinCheck != nil {
			names = append(names, builtin)
			all[builtin] = builtinCheck
		}
		sort.Strings(names)
		var b strings.Builder
		failed := false
		for _, n := range names {
			if err := all[n](r); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", n, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", n)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, b.String(), "check failed\n")
		case r.URL.Query().Has("verbose"):
			fmt.Fprint(w, b.String(), "ok\n")
		default:
			fmt.Fprint(w, "ok")
		}
	})
}

// listen opens addr, naming the server in the error.
func listen(what, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("framework: serve %s on %q: %w", what, addr, err)
	}
	return l, nil
}

// newServer returns an http.Server with conservative limits: slow clients
// cannot hold connections open or send huge headers.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
