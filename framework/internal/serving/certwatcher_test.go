package serving_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/internal/serving"
)

// writePair writes a self-signed certificate for 127.0.0.1 named cn, valid
// until notAfter, and its key into dir as tls.crt and tls.key, each by an
// atomic rename as a Secret volume or cert-manager does.
func writePair(t *testing.T, dir, cn string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	writeFile(t, dir, "tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeFile(t *testing.T, dir, name string, content []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// servedName starts nothing: it handshakes with addr and returns the common
// name of the certificate served.
func servedName(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate served, whoever signed it
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestCertWatcherServesRotatedCertificates(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first", time.Now().Add(time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	l, err := serving.Listen("webhook", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serving.Serve(ctx, serving.NewServer(http.NotFoundHandler()), l, serving.ServerTLSConfig(w.GetCertificate, false))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := l.Addr().String()

	if got := servedName(t, addr); got != "first" {
		t.Fatalf("serves %q, want first", got)
	}
	writePair(t, dir, "second", time.Now().Add(time.Hour))
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("after rotation serves %q, want second", got)
	}
	if err := w.Check(); err != nil {
		t.Errorf("Check after rotation: %v", err)
	}

	// A half-written rotation keeps the last good pair in service, and
	// Check reports it until the files hold a pair again.
	writeFile(t, dir, "tls.crt", []byte("-----BEGIN CERTIFICATE-----\ngarbage"))
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("during a broken rotation serves %q, want second", got)
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "webhook certificate from") {
		t.Errorf("Check during a broken rotation: %v, want an error naming the server and the files", err)
	}
	writePair(t, dir, "third", time.Now().Add(time.Hour))
	if got := servedName(t, addr); got != "third" {
		t.Fatalf("after the repair serves %q, want third", got)
	}
	if err := w.Check(); err != nil {
		t.Errorf("Check after the repair: %v", err)
	}
}

func TestCertWatcherRewrittenInPlace(t *testing.T) {
	// Writing the same file again (same inode), possibly within the file
	// system's clock tick, must still be seen.
	dir := t.TempDir()
	writePair(t, dir, "aaaa", time.Now().Add(time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writePair(t, other, "bbbb", time.Now().Add(time.Hour))
	for _, name := range []string{"tls.key", "tls.crt"} {
		b, err := os.ReadFile(filepath.Join(other, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := w.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cn := cert.Leaf.Subject.CommonName; cn != "bbbb" {
		t.Errorf("after an in-place rewrite serves %q, want bbbb", cn)
	}
}

func TestCertWatcherErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key"); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tls.crt")) {
		t.Errorf("NewCertWatcher on an empty directory: %v, want an error naming the file", err)
	}
	writePair(t, dir, "old", time.Now().Add(-time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "not now") {
		t.Errorf("Check of an expired certificate: %v", err)
	}
}
