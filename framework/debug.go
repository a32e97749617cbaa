package framework

import (
	"net/http"
	"slices"
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
			s.Leader.Leading = s.Leader.Leading && (*leading)() == nil
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
