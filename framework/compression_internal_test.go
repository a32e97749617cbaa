package framework

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// An API server on this machine gets requests that do not ask for gzip
// (nothing crosses a network there, and compressing costs CPU at both
// ends); one elsewhere keeps the rest.Config's setting unless
// DisableCompression says otherwise.
func TestClientConfigCompression(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		disable bool // Options.DisableCompression
		inCfg   bool // rest.Config.DisableCompression
		want    bool
	}{
		{name: "loopback IPv4", host: "https://127.0.0.1:6443", want: true},
		{name: "loopback IPv6", host: "https://[::1]:6443", want: true},
		{name: "localhost", host: "https://localhost:6443", want: true},
		{name: "in a cluster", host: "https://10.96.0.1:443", want: false},
		{name: "by name", host: "https://kubernetes.default.svc", want: false},
		{name: "a name that only starts like localhost", host: "https://localhost.example.com", want: false},
		{name: "remote, disabled by Options", host: "https://10.96.0.1:443", disable: true, want: true},
		{name: "remote, disabled by the rest.Config", host: "https://10.96.0.1:443", inCfg: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &rest.Config{Host: tc.host, DisableCompression: tc.inCfg}
			got := clientConfig(in, Options{DisableCompression: tc.disable})
			if got.DisableCompression != tc.want {
				t.Errorf("clientConfig(Host %q, Options.DisableCompression %v).DisableCompression = %v, want %v", tc.host, tc.disable, got.DisableCompression, tc.want)
			}
			if in.DisableCompression != tc.inCfg {
				t.Errorf("clientConfig changed the caller's rest.Config")
			}
		})
	}
}

// The transport built from the manager's rest.Config sends no
// Accept-Encoding to a server on loopback, so the server answers
// uncompressed; Go's transport would otherwise ask for gzip itself. (Over
// plain HTTP without a proxy or dialer client-go uses Go's default
// transport, which asks for gzip whatever the rest.Config says: the server
// here speaks TLS, as API servers do.)
func TestClientConfigLoopbackRequestsAskNoGzip(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Accept-Encoding")
	}))
	defer srv.Close()
	tls := rest.TLSClientConfig{Insecure: true}
	for _, tc := range []struct {
		name string
		opts Options
		base *rest.Config
		want string
	}{
		{name: "manager's config", base: &rest.Config{Host: srv.URL, TLSClientConfig: tls}, want: ""},
		{name: "the caller's config as it is", want: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &rest.Config{Host: srv.URL, TLSClientConfig: tls}
			if tc.base != nil {
				cfg = clientConfig(tc.base, tc.opts)
			}
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Get(srv.URL + "/api")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ae := <-got; ae != tc.want {
				t.Errorf("Accept-Encoding = %q, want %q", ae, tc.want)
			}
		})
	}
}
