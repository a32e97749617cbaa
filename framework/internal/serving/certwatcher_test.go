package serving_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/internal/serving"
	"github.com/converge-dev/converge/internal/testenv"
)

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
	testenv.WriteServingCert(t, dir, "first", time.Now().Add(time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	l, err := serving.Listen("webhook", "--webhook-flag", "127.0.0.1:0")
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
	testenv.WriteServingCert(t, dir, "second", time.Now().Add(time.Hour))
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("after rotation serves %q, want second", got)
	}
	if err := w.Check(); err != nil {
		t.Errorf("Check after rotation: %v", err)
	}

	// A half-written rotation keeps the last good pair in service, and
	// Check reports it until the files hold a pair again.
	testenv.WriteFileAtomic(t, dir, "tls.crt", []byte("-----BEGIN CERTIFICATE-----\ngarbage"))
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("during a broken rotation serves %q, want second", got)
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "webhook certificate from") {
		t.Errorf("Check during a broken rotation: %v, want an error naming the server and the files", err)
	}
	testenv.WriteServingCert(t, dir, "third", time.Now().Add(time.Hour))
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
	testenv.WriteServingCert(t, dir, "aaaa", time.Now().Add(time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	testenv.WriteServingCert(t, other, "bbbb", time.Now().Add(time.Hour))
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
	testenv.WriteServingCert(t, dir, "old", time.Now().Add(-time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "not now") {
		t.Errorf("Check of an expired certificate: %v", err)
	}
}

// TestCertWatcherConcurrentRotation: handshakes and readiness checks run
// while the pair is rotated over and over (the key written before the
// certificate, so a mismatched pair is seen in between); every handshake
// succeeds with one of the pairs written, and -race finds nothing.
func TestCertWatcherConcurrentRotation(t *testing.T) {
	dir := t.TempDir()
	testenv.WriteServingCert(t, dir, "rot-0", time.Now().Add(time.Hour))
	w, err := serving.NewCertWatcher("webhook", dir, "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	const rotations, clients = 20, 4
	stop := make(chan struct{})
	errs := make(chan error, clients)
	for range clients {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				cert, err := w.GetCertificate(nil)
				if err != nil || cert == nil || !strings.HasPrefix(cert.Leaf.Subject.CommonName, "rot-") {
					errs <- fmt.Errorf("GetCertificate during rotation: %v, %v", cert, err)
					return
				}
				_ = w.Check()
			}
		}()
	}
	for i := 1; i <= rotations; i++ {
		testenv.WriteServingCert(t, dir, fmt.Sprintf("rot-%d", i), time.Now().Add(time.Hour))
	}
	close(stop)
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	cert, err := w.GetCertificate(nil)
	if err != nil || cert.Leaf.Subject.CommonName != fmt.Sprintf("rot-%d", rotations) {
		t.Errorf("after the rotations serves %v (%v), want rot-%d", cert.Leaf.Subject.CommonName, err, rotations)
	}
}
