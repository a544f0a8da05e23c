package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// ErrReservedName is a node name that API server certificates carry
// (localhost, kubernetes.default.svc, ...): a node's serving certificate
// for it would let the board pass itself off as an API server.
var ErrReservedName = errors.New("the name is one that API server certificates carry")

// IssueNodeServing issues the serving certificate of a node agent's
// streaming server (ExtKeyUsageServerAuth, valid for LeafValidity) for the
// P-256 key of the certificate request csrPEM. The certificate names the
// DNS name node only, whatever the request asks for: no IP addresses, which
// a board could choose to be an API server's, and none of the names every
// API server certificate carries (ErrReservedName). The API servers verify
// a node agent by its node name.
func (ca *CA) IssueNodeServing(node string, csrPEM []byte, now time.Time) (certPEM []byte, err error) {
	if err := checkDNSName(node); err != nil || strings.Contains(node, "*") {
		return nil, fmt.Errorf("pki: issue node serving certificate: node name %q: want a DNS name, lower case, no wildcard", node)
	}
	if slices.Contains(defaultDNSNames, node) {
		return nil, fmt.Errorf("pki: issue node serving certificate for %q: %w", node, ErrReservedName)
	}
	pub, err := parseCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: issue node serving certificate for %q: %w", node, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: node},
		DNSNames:    []string{node},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, err = ca.sign(tmpl, pub, now)
	if err != nil {
		return nil, fmt.Errorf("pki: issue node serving certificate for %q: %w", node, err)
	}
	return certPEM, nil
}

// parseCSR returns the P-256 key of a PEM certificate request whose
// signature (the proof that its sender has the key) verifies.
func parseCSR(csrPEM []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		return nil, errors.New("certificate request: no PEM block found")
	}
	if block.Type != wire.PEMCertificateRequest {
		return nil, fmt.Errorf("certificate request: PEM block is %q, want %q", block.Type, wire.PEMCertificateRequest)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("certificate request: key is %s, want ECDSA P-256", csr.PublicKeyAlgorithm)
	}
	return pub, nil
}

// ClientConfig returns a TLS client configuration that trusts only the CA
// and presents a client certificate for commonName and orgs, issued when
// first asked for and again when its renewal is due (RenewalDue at now()),
// so that a server running for years never presents an expired one. It
// issues the first one at once, to report a CA that cannot issue. Set
// ServerName (on a clone) to the name the server must have. now nil:
// time.Now.
func (ca *CA) ClientConfig(commonName string, orgs []string, now func() time.Time) (*tls.Config, error) {
	if now == nil {
		now = time.Now
	}
	c := &clientCert{ca: ca, commonName: commonName, orgs: slices.Clone(orgs), now: now}
	if _, err := c.get(nil); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), GetClientCertificate: c.get}, nil
}

// clientCert is ClientConfig's certificate.
type clientCert struct {
	ca         *CA
	commonName string
	orgs       []string
	now        func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

func (c *clientCert) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.cert != nil && !wire.RenewalDue(c.cert.Leaf, now) {
		return c.cert, nil
	}
	certPEM, keyPEM, err := c.ca.IssueClient(c.commonName, c.orgs, now)
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.X509KeyPair(certPEM, keyPEM); err == nil {
			c.cert = &pair
			return c.cert, nil
		}
	}
	if c.cert != nil && now.Before(c.cert.Leaf.NotAfter) {
		return c.cert, nil // still valid: renew on the next connection
	}
	return nil, fmt.Errorf("pki: client certificate for %q: %w", c.commonName, err)
}
