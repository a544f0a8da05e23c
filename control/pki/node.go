package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
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
