package serving

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// TLSConfig serves the certificate certName and key keyName from certDir,
// read again when they change (see CertWatcher), or a self-signed one made
// now when certDir is "". ALPN offers "h2" only when enableHTTP2 is set.
func TLSConfig(certDir, certName, keyName string, enableHTTP2 bool) (*tls.Config, error) {
	if certDir != "" {
		w, err := NewCertWatcher("metrics", certDir, certName, keyName)
		if err != nil {
			return nil, err
		}
		return ServerTLSConfig(w.GetCertificate, enableHTTP2), nil
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("framework: self-signed metrics certificate: %w", err)
	}
	cfg := ServerTLSConfig(nil, enableHTTP2)
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

// ServerTLSConfig is the TLS configuration of every HTTPS server: TLS 1.2
// or later, the certificate from getCert, and "h2" offered in ALPN only
// when enableHTTP2 is set.
func ServerTLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), enableHTTP2 bool) *tls.Config {
	protos := []string{"http/1.1"}
	if enableHTTP2 {
		protos = []string{"h2", "http/1.1"}
	}
	return &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12, NextProtos: protos}
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
