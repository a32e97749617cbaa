package serving

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CertWatcher serves a certificate and key read from two files, and reads
// them again whenever either file changes (its size, modification time or
// inode, which also catches the symlink swap of a Kubernetes Secret volume),
// so a rotated certificate is served from the next TLS handshake on. A pair
// that fails to load (a half-written rotation) leaves the last good one in
// service until the files change again. A CertWatcher is safe for
// concurrent use.
type CertWatcher struct {
	what              string // names the server in errors
	certPath, keyPath string

	mu sync.Mutex
	// cert is the pair in service and leaf its parsed certificate;
	// certInfo and keyInfo are the files' states it was read from, and
	// loadErr the error of the last failed read since (nil after a
	// successful one). racy is set when the files were read within
	// racyWindow of their last change: a write in the same clock tick
	// could leave size and time as they were, so they are read again next
	// time. mu guards them.
	cert              *tls.Certificate
	leaf              *x509.Certificate
	certInfo, keyInfo os.FileInfo
	loadErr           error
	racy              bool
}

// racyWindow is how recent a change must be for the files to be read again
// even when their size, time and inode look the same (file systems keep
// modification times in coarse ticks).
const racyWindow = 2 * time.Second

// NewCertWatcher reads certName and keyName in dir, for the server named
// what; it fails, naming the server and the files, when they do not hold a
// valid pair.
func NewCertWatcher(what, dir, certName, keyName string) (*CertWatcher, error) {
	w := &CertWatcher{what: what, certPath: filepath.Join(dir, certName), keyPath: filepath.Join(dir, keyName)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(); err != nil {
		return nil, err
	}
	return w, nil
}

// GetCertificate returns the pair in service, read again first if the
// files changed; it suits tls.Config.GetCertificate.
func (w *CertWatcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.reloadLocked() // a failed reload keeps the last good pair; Check reports it
	return w.cert, nil
}

// Check reads the files again if they changed and reports whether the
// certificate in service is valid now: an error if it has expired or is not
// valid yet, or if the files changed to a pair that does not load.
func (w *CertWatcher) Check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(); err != nil {
		return err
	}
	now := time.Now()
	if now.Before(w.leaf.NotBefore) || now.After(w.leaf.NotAfter) {
		return fmt.Errorf("%s certificate %s is valid from %s to %s, not now", w.what, w.certPath, w.leaf.NotBefore.Format(time.RFC3339), w.leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// reloadLocked reads the pair again when the files changed since the last
// read, successful or not. The caller holds mu.
func (w *CertWatcher) reloadLocked() error {
	ci, err1 := os.Stat(w.certPath)
	ki, err2 := os.Stat(w.keyPath)
	if err1 == nil && err2 == nil && !w.racy && same(ci, w.certInfo) && same(ki, w.keyInfo) {
		return w.loadErr
	}
	w.certInfo, w.keyInfo = ci, ki
	w.racy = err1 == nil && err2 == nil && time.Since(later(ci.ModTime(), ki.ModTime())) < racyWindow
	w.loadErr = w.load()
	return w.loadErr
}

func (w *CertWatcher) load() error {
	cert, err := tls.LoadX509KeyPair(w.certPath, w.keyPath)
	if err != nil {
		return fmt.Errorf("framework: %s certificate from %s and %s: %w", w.what, w.certPath, w.keyPath, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("framework: %s certificate from %s: %w", w.what, w.certPath, err)
	}
	cert.Leaf = leaf
	w.cert, w.leaf = &cert, leaf
	return nil
}

// same reports whether a file is unchanged since b was taken.
func same(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
