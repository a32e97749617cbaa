package envtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long generated certificates are valid; an Environment lives for a
// test run, but a demo may run for days.
const certValidity = 10 * 365 * 24 * time.Hour

// keyPair is a certificate and its ECDSA P-256 private key, parsed and PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// authority is the Environment's certificate authority. It signs kube-apiserver's serving
// certificate and the client certificates, and kube-apiserver trusts it for clients
// (--client-ca-file). It is immutable once made, so safe for concurrent use.
type authority struct {
	keyPair
}

// newAuthority generates a self-signed CA.
func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl, err := template(pkix.Name{CommonName: "converge-envtest-ca"})
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	kp, err := newKeyPair(der, key)
	if err != nil {
		return nil, err
	}
	return &authority{kp}, nil
}

// serving issues a TLS server certificate for hosts (IP addresses or DNS names).
func (ca *authority) serving(cn string, hosts []string) (keyPair, error) {
	tmpl, err := template(pkix.Name{CommonName: cn})
	if err != nil {
		return keyPair{}, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// client issues a TLS client certificate that kube-apiserver reads as user name in groups.
func (ca *authority) client(name string, groups []string) (keyPair, error) {
	tmpl, err := template(pkix.Name{CommonName: name, Organization: groups})
	if err != nil {
		return keyPair{}, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(tmpl)
}

// issue signs tmpl with a fresh key.
func (ca *authority) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key for %q: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return newKeyPair(der, key)
}

// template returns a certificate template for subject with a random serial number,
// valid from an hour ago (clock skew) for certValidity.
func template(subject pkix.Name) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
	}, nil
}

// newKeyPair parses der and PEM-encodes it with key.
func newKeyPair(der []byte, key *ecdsa.PrivateKey) (keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse generated certificate: %w", err)
	}
	keyPEM, err := encodePrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// encodePrivateKey PEM-encodes key as an "EC PRIVATE KEY" block, which every Kubernetes
// component and client-go read.
func encodePrivateKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// serviceAccountKeys generates the key pair that signs service account tokens and returns
// the private key and public key, PEM-encoded.
func serviceAccountKeys() (priv, pub []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate service account key: %w", err)
	}
	priv, err = encodePrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encode service account public key: %w", err)
	}
	return priv, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// writeFiles writes each name → content pair into dir with mode 0600.
func writeFiles(dir string, files map[string][]byte) error {
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
