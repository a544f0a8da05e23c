package pki

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// testNow is a fixed time for certificates in tests; it must be near the
// real clock because TLS handshakes check validity against time.Now.
var testNow = time.Now().Truncate(time.Second)

func mustCA(t *testing.T, cn string) *CA {
	t.Helper()
	ca, err := NewCA(cn, testNow)
	if err != nil {
		t.Fatalf("NewCA(%q): %v", cn, err)
	}
	return ca
}

func mustParseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE PEM block in %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	return cert
}

func mustServing(t *testing.T, ca *CA) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueServing("isle-apiserver", []string{"isle-1.local"}, nil, testNow)
	if err != nil {
		t.Fatalf("IssueServing: %v", err)
	}
	return certPEM, keyPEM
}

func mustClient(t *testing.T, ca *CA, cn string, orgs ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueClient(cn, orgs, testNow)
	if err != nil {
		t.Fatalf("IssueClient: %v", err)
	}
	return certPEM, keyPEM
}
