package framework_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/testenv"
)

// The metrics server serves the certificate of --metrics-cert-path under
// the file names --metrics-cert-name and --metrics-cert-key, as
// cert-manager's Secrets hold them (ca.crt beside tls.crt and tls.key, or
// names of one's own), and its clients can verify it.
func TestMetricsServeTheCertificateOfCertDir(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.WriteServingCert(t, dir, "metrics.op-system.svc", time.Now().Add(time.Hour))
	for from, to := range map[string]string{"tls.crt": "cert.pem", "tls.key": "key.pem"} {
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	f := framework.Flags{}
	fs := newFlagSet()
	f.Register(fs)
	if err := fs.Parse([]string{"--metrics-bind-address=127.0.0.1:0", "--metrics-cert-path=" + dir, "--metrics-cert-name=cert.pem", "--metrics-cert-key=key.pem"}); err != nil {
		t.Fatal(err)
	}
	opts, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	if m := opts.Metrics; m.CertDir != dir || m.CertName != "cert.pem" || m.KeyName != "key.pem" {
		t.Fatalf("metrics options = %+v, want the flags' folder and names", m)
	}
	mgr := testenv.NewManager(t, unreachable, opts)
	run := testenv.StartManager(t, mgr)
	testenv.Eventually(t, "the metrics server listens", func() bool {
		select {
		case <-run.Done:
			t.Fatalf("the manager stopped: %v", run.Err)
		default:
		}
		return mgr.MetricsAddress() != ""
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	conn, err := tls.Dial("tcp", mgr.MetricsAddress(), &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("dial the metrics server trusting the certificate of %s: %v", dir, err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "metrics.op-system.svc" {
		t.Errorf("the metrics server serves a certificate for %q, want the one in %s", cn, dir)
	}
}

// Names of certificate files without a folder to find them in are an
// error, not ignored.
func TestMetricsCertNamesWithoutCertDir(t *testing.T) {
	_, err := framework.NewManager(unreachable, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", CertName: "cert.pem"}})
	if err == nil || !strings.Contains(err.Error(), `Options.Metrics.CertName "cert.pem" and KeyName "tls.key" name files in CertDir, which is empty`) {
		t.Errorf("NewManager with CertName and no CertDir: %v, want an error naming the fields", err)
	}
}
