package wire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// APIServerUser is the user (common name) of the client certificate the API
// servers present to the node agents' streaming servers, which accept no
// other client. The API server itself grants this user nothing.
const APIServerUser = "isle:apiserver"

// APIServerName is the name every server's certificate carries, so a board
// can verify whichever server it reaches.
const APIServerName = "kubernetes.default.svc"

// ServingCertPath is where a board asks the servers for its streaming
// server's certificate: POST, authenticated by the node credential
// (Authorization: Bearer), the body a PEM certificate request
// (NewCSR), the answer the PEM certificate (pki.IssueNodeServing), for
// the node the credential belongs to, whatever the request names.
const ServingCertPath = "/isle/v1/node-serving-cert"

// PEMCertificateRequest is the PEM block type of a certificate request.
const PEMCertificateRequest = "CERTIFICATE REQUEST"

// NewCSR makes a P-256 key and a certificate request for it naming
// commonName; the CA decides the certificate's names (IssueNodeServing).
func NewCSR(commonName string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: new certificate request: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: new certificate request: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: new certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMCertificateRequest, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// RenewalDue reports whether less than a third of cert's validity remains
// at now: the time to replace it.
func RenewalDue(cert *x509.Certificate, now time.Time) bool {
	validity := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Sub(now) < validity/3
}

// ParseCertPEM parses the first PEM block, which must be a certificate.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("certificate: no PEM block found")
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certificate: PEM block is %q, want %q", block.Type, "CERTIFICATE")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	return cert, nil
}
