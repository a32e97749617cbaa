package framework_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testapi"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
)

// webhookManager is a manager serving sprocketValidator whose API server
// never answers, with leader election on: it never leads, and must serve
// its webhooks all the same. start starts it and returns its address and a
// pool trusting the serving certificate. (Managers are all made before any
// starts: NewManager sets klog's global logger.)
func webhookManager(t *testing.T, enableHTTP2 bool, maxBytes int64) (start func() (string, *x509.CertPool)) {
	t.Helper()
	dir := t.TempDir()
	ca := testenv.WriteServingCert(t, dir, "server", time.Now().Add(time.Hour))
	mgr := testenv.NewManager(t, unreachable, framework.Options{
		Scheme:         sprocketScheme(t),
		LeaderElection: framework.LeaderElectionOptions{Enabled: true, ID: "webhooks", Lease: lease.Options{Namespace: "default"}},
		Webhook:        framework.WebhookServerOptions{Addr: "127.0.0.1:0", CertDir: dir, EnableHTTP2: enableHTTP2, MaxRequestBytes: maxBytes},
	})
	if err := framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Validator: sprocketValidator}); err != nil {
		t.Fatal(err)
	}
	return func() (string, *x509.CertPool) {
		testenv.StartManager(t, mgr)
		testenv.Eventually(t, "the webhook server listens", func() bool { return mgr.WebhookAddress() != "" })
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		return mgr.WebhookAddress(), roots
	}
}

// TestWebhookServerProtocols: ALPN offers h2 only with EnableHTTP2 (and
// then HTTP/2 really serves), TLS below 1.2 is refused, and the server
// answers while the manager does not lead.
func TestWebhookServerProtocols(t *testing.T) {
	starts := map[bool]func() (string, *x509.CertPool){false: webhookManager(t, false, 0), true: webhookManager(t, true, 0)}
	for _, enable := range []bool{false, true} {
		addr, roots := starts[enable]()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatalf("EnableHTTP2=%v: dial: %v", enable, err)
		}
		if got, want := conn.ConnectionState().NegotiatedProtocol, map[bool]string{false: "http/1.1", true: "h2"}[enable]; got != want {
			t.Errorf("EnableHTTP2=%v: ALPN negotiated %q, want %q", enable, got, want)
		}
		conn.Close()

		// A client that prefers HTTP/2 gets an answer either way, over
		// the protocol the server allows.
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
		resp, err := (&http.Client{Transport: tr}).Post("https://"+addr+webhook.ValidatePath(testapi.V2.WithKind("Sprocket")), "application/json", strings.NewReader("{"))
		if err != nil {
			t.Fatalf("EnableHTTP2=%v: POST: %v", enable, err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 1, true: 2}[enable]; resp.ProtoMajor != want || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("EnableHTTP2=%v: answered %d over %s, want 400 over HTTP/%d", enable, resp.StatusCode, resp.Proto, want)
		}
		tr.CloseIdleConnections()

		if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
			t.Errorf("EnableHTTP2=%v: a TLS 1.1 handshake succeeded", enable)
		}
	}
}

// TestWebhookServerBodyLimit: a chunked body (no Content-Length) over
// Options.Webhook.MaxRequestBytes is refused with 413 too.
func TestWebhookServerBodyLimit(t *testing.T) {
	addr, roots := webhookManager(t, false, 1<<10)()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(bytes.Repeat([]byte(" "), 2<<10))
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, err := http.NewRequest(http.MethodPost, "https://"+addr+webhook.ValidatePath(testapi.V2.WithKind("Sprocket")), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("chunked=%v: %v", chunked, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked=%v: %d, want 413", chunked, resp.StatusCode)
		}
	}
}

// TestConversionDoesNotWaitForCaches: the API server reaches a conversion
// webhook through a Service, which routes only to ready pods, and the
// caches of a kind stored at another version cannot sync until it does:
// a manager serving a conversion webhook is ready once that webhook
// serves, whatever its caches. Without one, readiness waits for them.
func TestConversionDoesNotWaitForCaches(t *testing.T) {
	dir := t.TempDir()
	testenv.WriteServingCert(t, dir, "server", time.Now().Add(time.Hour))
	opts := framework.Options{Scheme: sprocketScheme(t), HealthProbeBindAddress: "127.0.0.1:0", Webhook: framework.WebhookServerOptions{Addr: "127.0.0.1:0", CertDir: dir}}
	converting, admitting := testenv.NewManager(t, unreachable, opts), testenv.NewManager(t, unreachable, opts)
	if err := framework.AddConversion(converting, &testapi.Sprocket{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.AddWebhook(admitting, framework.WebhookOptions[*testapi.Sprocket]{Validator: sprocketValidator}); err != nil {
		t.Fatal(err)
	}
	// Both watch Sprockets, at v1: their caches never sync.
	for _, mgr := range []*framework.Manager{converting, admitting} {
		if _, err := informers.For[*testapi.SprocketV1](mgr.Cache(), informers.Selection{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		mgr  *framework.Manager
		code int
	}{{"conversion", converting, http.StatusOK}, {"admission only", admitting, http.StatusServiceUnavailable}} {
		testenv.StartManager(t, tc.mgr)
		testenv.Eventually(t, "the servers listen", func() bool { return tc.mgr.WebhookAddress() != "" && tc.mgr.HealthProbeAddress() != "" })
		var code int
		var body []byte
		testenv.Eventually(t, "/readyz sees the webhook server", func() bool {
			resp, err := http.Get("http://" + tc.mgr.HealthProbeAddress() + "/readyz?verbose")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			code = resp.StatusCode
			body, _ = io.ReadAll(resp.Body)
			return strings.Contains(string(body), "[+]webhook-server ok")
		})
		if code != tc.code {
			t.Errorf("%s: /readyz = %d, want %d:\n%s", tc.name, code, tc.code, body)
		}
	}
}
