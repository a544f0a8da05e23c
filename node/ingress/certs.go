package ingress

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// certCache keeps the certificates parsed from Secrets across Updates, so
// that an unchanged Secret is not parsed again. Only Update uses it, under
// its lock.
type certCache struct {
	entries map[string]*certEntry // by namespace/name
	used    map[string]bool       // entries taken by the table being built
}

type certEntry struct {
	crt, key []byte
	cert     *tls.Certificate
	err      error
}

func newCertCache() *certCache {
	return &certCache{entries: make(map[string]*certEntry), used: make(map[string]bool)}
}

// get returns the certificate of the TLS Secret name (namespace/name);
// sec is nil if there is no such Secret.
func (c *certCache) get(name string, sec *corev1.Secret) (*tls.Certificate, error) {
	if sec == nil {
		return nil, errors.New("not found")
	}
	if sec.Type != corev1.SecretTypeTLS {
		return nil, fmt.Errorf("type %q, want %q", sec.Type, corev1.SecretTypeTLS)
	}
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("want data %s and %s", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	c.used[name] = true
	e := c.entries[name]
	if e == nil || !bytes.Equal(e.crt, crt) || !bytes.Equal(e.key, key) {
		e = &certEntry{crt: crt, key: key}
		cert, err := tls.X509KeyPair(crt, key)
		if err != nil {
			e.err = fmt.Errorf("%s/%s: %w", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
		} else {
			e.cert = &cert
		}
		c.entries[name] = e
	}
	return e.cert, e.err
}

// sweep drops the entries the last built table did not take.
func (c *certCache) sweep() {
	for name := range c.entries {
		if !c.used[name] {
			delete(c.entries, name)
		}
	}
	clear(c.used)
}

// fallbackCertificate makes the self-signed certificate of handshakes no
// Ingress has a certificate for.
func fallbackCertificate(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ingress: fallback certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("ingress: fallback certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "isle ingress fallback certificate"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ingress: fallback certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ingress: fallback certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
