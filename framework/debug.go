package framework

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
)

// debugProvider is the manager as package introspect reads it.
type debugProvider struct{ m *Manager }

var _ introspect.Provider = debugProvider{}

func (p debugProvider) State(now time.Time) introspect.State { return p.m.debugState(now) }

func (p debugProvider) Informers() []informers.InformerStats { return p.m.cache.Stats() }

func (p debugProvider) Controllers() []introspect.Controller {
	cs := p.m.inspectedControllers()
	out := make([]introspect.Controller, len(cs))
	for i, c := range cs {
		out[i] = inspected{c}
	}
	return out
}

// debugHandler serves the debug page and its JSON API. Authentication and
// authorization are the caller's (see startServers).
func (m *Manager) debugHandler() http.Handler {
	return introspect.Handler(debugProvider{m}, m.log)
}

// debugState is the manager at a glance.
func (m *Manager) debugState(now time.Time) introspect.State {
	le := m.opts.LeaderElection
	m.mu.Lock()
	s := introspect.State{
		Time:     now.UTC(),
		Leader:   introspect.LeaderStatus{Election: le.Enabled, Leading: m.leading},
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
	s.Controllers = make([]introspect.ControllerStatus, 0, len(cs))
	for _, c := range cs {
		s.Controllers = append(s.Controllers, c.status(now))
	}
	s.Informers = m.cache.Stats()
	s.Memory = introspect.MemoryOf(s.Informers, m.cache.SharedBytes())
	for _, st := range m.clusters.Stats() {
		s.Clusters = append(s.Clusters, clusterStatus(st))
	}
	s.Clusters = introspect.CountKeys(s.Clusters, s.Controllers)
	return s
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
