package framework

import (
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
