package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
)

// startServers opens the configured listeners (failing at once, naming the
// address, when one cannot be opened) and serves them on g.
func (m *Manager) startServers(g *group) error {
	if addr := m.opts.HealthProbeBindAddress; addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/healthz", m.probeHandler(m.healthChecks, "ping", func(*http.Request) error { return nil }))
		mux.Handle("/livez", m.probeHandler(m.healthChecks, "ping", func(*http.Request) error { return nil }))
		mux.Handle("/readyz", m.probeHandler(m.readyChecks, "caches", m.cacheReady))
		l, err := listen("health probes", addr)
		if err != nil {
			return err
		}
		m.setAddr(&m.probeAddr, l)
		g.start(serve(newServer(mux), l, nil))
	}
	if addr := m.opts.Metrics.BindAddress; addr != "" {
		handler := promhttp.HandlerFor(m.metrics.registry, promhttp.HandlerOpts{ErrorLog: nil, Registry: m.metrics.registry})
		mux := http.NewServeMux()
		var tlsConfig *tls.Config
		if m.opts.Metrics.Insecure {
			mux.Handle("/metrics", handler)
		} else {
			cs, err := kubernetes.NewForConfig(m.cfg)
			if err != nil {
				return fmt.Errorf("framework: metrics authorization client: %w", err)
			}
			mux.Handle("/metrics", newAuthFilter(cs, m.log).wrap(handler))
			if tlsConfig, err = m.metricsTLS(); err != nil {
				return err
			}
		}
		l, err := listen("metrics", addr)
		if err != nil {
			return err
		}
		m.setAddr(&m.metricsAddr, l)
		srv := newServer(mux)
		if !m.opts.Metrics.EnableHTTP2 {
			// A non-nil, empty map turns HTTP/2 off for TLS connections.
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		g.start(serve(srv, l, tlsConfig))
	}
	if addr := m.opts.Metrics.PprofBindAddress; addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		l, err := listen("pprof", addr)
		if err != nil {
			return err
		}
		srv := newServer(mux)
		srv.WriteTimeout = 0 // profiles stream for as long as asked
		g.start(serve(srv, l, nil))
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

// serve runs srv on l until ctx ends, then shuts it down gracefully.
func serve(srv *http.Server, l net.Listener, tlsConfig *tls.Config) Runnable {
	return RunnableFunc(func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() {
			var err error
			if tlsConfig != nil {
				err = srv.Serve(tls.NewListener(l, tlsConfig))
			} else {
				err = srv.Serve(l)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
			return <-errc
		}
	})
}

// metricsTLS loads the certificate from CertDir or makes a self-signed one.
func (m *Manager) metricsTLS() (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if dir := m.opts.Metrics.CertDir; dir != "" {
		cert, err = tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("framework: metrics certificate from %s: %w", dir, err)
		}
	} else if cert, err = selfSigned(); err != nil {
		return nil, fmt.Errorf("framework: self-signed metrics certificate: %w", err)
	}
	protos := []string{"http/1.1"}
	if m.opts.Metrics.EnableHTTP2 {
		protos = []string{"h2", "http/1.1"}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: protos}, nil
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "converge-metrics"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", host},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
