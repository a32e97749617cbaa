package serving_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/converge-dev/converge/framework/internal/serving"
)

func TestNewServerLimits(t *testing.T) {
	srv := serving.NewServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("every timeout must be set: %+v", srv)
	}
	if srv.MaxHeaderBytes != 64<<10 {
		t.Errorf("MaxHeaderBytes = %d, want %d", srv.MaxHeaderBytes, 64<<10)
	}
	if srv.TLSNextProto != nil {
		t.Error("NewServer must leave HTTP/2 to DisableHTTP2")
	}
	serving.DisableHTTP2(srv)
	if srv.TLSNextProto == nil || len(srv.TLSNextProto) != 0 {
		t.Errorf("DisableHTTP2 must set an empty, non-nil TLSNextProto: %v", srv.TLSNextProto)
	}
}

func TestTLSConfigOffersHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, enable := range []bool{false, true} {
		cfg, err := serving.TLSConfig("", "", "", enable)
		if err != nil {
			t.Fatalf("TLSConfig(self-signed, %v): %v", enable, err)
		}
		if got := slices.Contains(cfg.NextProtos, "h2"); got != enable {
			t.Errorf("TLSConfig(_, %v) offers %v", enable, cfg.NextProtos)
		}
		if len(cfg.Certificates) != 1 {
			t.Errorf("TLSConfig(_, %v): %d certificates, want 1", enable, len(cfg.Certificates))
		}
	}
	if _, err := serving.TLSConfig(t.TempDir(), "tls.crt", "tls.key", false); err == nil || !strings.Contains(err.Error(), "metrics certificate from") {
		t.Errorf("TLSConfig on an empty directory: %v, want an error naming the directory", err)
	}
}

func TestListenNamesTheServerAddressAndFlag(t *testing.T) {
	l, err := serving.Listen("probe", "--probe-flag", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = serving.Listen("metrics", "--metrics-flag", l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "metrics") || !strings.Contains(err.Error(), l.Addr().String()) || !strings.Contains(err.Error(), "--metrics-flag") {
		t.Errorf("Listen on a taken address: %v, want an error naming the server, the address and the flag", err)
	}
}

func TestProbeHandler(t *testing.T) {
	ok := func(*http.Request) error { return nil }
	bad := func(*http.Request) error { return errors.New("no lease") }
	for _, tc := range []struct {
		name   string
		checks map[string]func(*http.Request) error
		query  string
		code   int
		body   string
	}{
		{"healthy", map[string]func(*http.Request) error{"a": ok}, "", http.StatusOK, "ok"},
		{"verbose", map[string]func(*http.Request) error{"b": ok, "a": ok}, "?verbose", http.StatusOK, "[+]a ok\n[+]b ok\nok\n"},
		{"failing", map[string]func(*http.Request) error{"a": ok, "b": bad}, "", http.StatusServiceUnavailable, "[+]a ok\n[-]b failed: no lease\ncheck failed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h := serving.ProbeHandler(func() map[string]func(*http.Request) error { return tc.checks })
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz"+tc.query, nil))
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
		})
	}
}

func TestLoopbackServer(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"https://127.0.0.1:6443", true},
		{"https://127.0.0.53", true},
		{"https://[::1]:6443/prefix", true},
		{"https://localhost:6443", true},
		{"http://LOCALHOST", true},
		{"127.0.0.1:6443", true},
		{"localhost", true},
		{"https://10.96.0.1:443", false},
		{"https://kubernetes.default.svc", false},
		{"https://localhost.example.com", false},
		{"https://[2001:db8::1]:6443", false},
		{"", false},
	} {
		if got := serving.LoopbackServer(tc.host); got != tc.want {
			t.Errorf("LoopbackServer(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
