package framework

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/converge-dev/converge/framework/internal/serving"
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

// cacheReadiness is /readyz's built-in check: m.cacheReady, or none when m
// serves a conversion webhook. The API server calls that webhook through a
// Service, which routes only to ready pods, and the caches of a kind stored
// at another version cannot list until the call succeeds: waiting for them
// would keep every replica unready for good.
func (m *Manager) cacheReadiness() Check {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conversion != nil {
		return nil
	}
	return m.cacheReady
}

// probeHandler serves checks plus the built-in one (see
// serving.ProbeHandler); checks is read under m.mu on each request.
func (m *Manager) probeHandler(checks map[string]Check, builtin string, builtinCheck Check) http.Handler {
	return serving.ProbeHandler(func() map[string]func(*http.Request) error {
		m.mu.Lock()
		all := make(map[string]func(*http.Request) error, len(checks)+1)
		for n, c := range checks {
			all[n] = c
		}
		m.mu.Unlock()
		if builtinCheck != nil {
			all[builtin] = builtinCheck
		}
		return all
	})
}
