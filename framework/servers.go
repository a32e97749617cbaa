package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework/internal/runner"
	"github.com/converge-dev/converge/framework/internal/serving"
	"github.com/converge-dev/converge/framework/introspect"
)

// startServers opens the configured listeners (failing at once, naming the
// address, when one cannot be opened) and serves them on g.
func (m *Manager) startServers(g *runner.Group) error {
	if err := m.startWebhookServer(g); err != nil {
		return err
	}
	if addr := m.opts.HealthProbeBindAddress; addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/healthz", m.probeHandler(m.healthChecks, "ping", func(*http.Request) error { return nil }))
		mux.Handle("/livez", m.probeHandler(m.healthChecks, "ping", func(*http.Request) error { return nil }))
		mux.Handle("/readyz", m.probeHandler(m.readyChecks, "caches", m.cacheReadiness()))
		l, err := serving.Listen("health probes", "--health-probe-bind-address, Options.HealthProbeBindAddress", addr)
		if err != nil {
			return err
		}
		m.setAddr(&m.probeAddr, l)
		g.Start(serve(serving.NewServer(mux), l, nil))
	}
	if addr := m.opts.Metrics.BindAddress; addr != "" {
		handler := promhttp.HandlerFor(m.metrics.Registry, promhttp.HandlerOpts{ErrorLog: nil, Registry: m.metrics.Registry})
		mux := http.NewServeMux()
		var tlsConfig *tls.Config
		var debug http.Handler
		if !m.opts.Metrics.DisableDebug {
			debug = m.debugHandler()
		}
		if m.opts.Metrics.Insecure {
			mux.Handle("/metrics", handler)
			if debug != nil {
				mux.Handle(introspect.Path, serving.LoopbackOnly(debug))
			}
		} else {
			cs, err := kubernetes.NewForConfig(m.cfg)
			if err != nil {
				return fmt.Errorf("framework: metrics authorization client: %w", err)
			}
			auth := serving.NewAuthFilter(cs, m.log)
			mux.Handle("/metrics", auth.Wrap(handler))
			if debug != nil {
				mux.Handle(introspect.Path, auth.Wrap(debug))
			}
			if tlsConfig, err = serving.TLSConfig(m.opts.Metrics.CertDir, m.opts.Metrics.CertName, m.opts.Metrics.KeyName, m.opts.Metrics.EnableHTTP2); err != nil {
				return err
			}
		}
		l, err := serving.Listen("metrics", "--metrics-bind-address, Options.Metrics.BindAddress", addr)
		if err != nil {
			return err
		}
		m.setAddr(&m.metricsAddr, l)
		srv := serving.NewServer(mux)
		if !m.opts.Metrics.EnableHTTP2 {
			serving.DisableHTTP2(srv)
		}
		g.Start(serve(srv, l, tlsConfig))
	}
	if addr := m.opts.Metrics.PprofBindAddress; addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		l, err := serving.Listen("pprof", "Options.Metrics.PprofBindAddress", addr)
		if err != nil {
			return err
		}
		srv := serving.NewServer(mux)
		srv.WriteTimeout = 0 // profiles stream for as long as asked
		g.Start(serve(srv, l, nil))
	}
	return nil
}

func (m *Manager) setAddr(dst *string, l net.Listener) {
	m.mu.Lock()
	*dst = l.Addr().String()
	m.mu.Unlock()
}

// MetricsAddress returns the address /metrics is served on (useful with a
// ":0" bind address), or "" when it is not served or Start has not opened it.
func (m *Manager) MetricsAddress() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metricsAddr
}

// HealthProbeAddress returns the address /healthz and /readyz are served
// on, or "" when they are not served or Start has not opened them.
func (m *Manager) HealthProbeAddress() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.probeAddr
}

// serve runs srv on l until ctx ends (see serving.Serve).
func serve(srv *http.Server, l net.Listener, tlsConfig *tls.Config) Runnable {
	return RunnableFunc(func(ctx context.Context) error {
		return serving.Serve(ctx, srv, l, tlsConfig)
	})
}
