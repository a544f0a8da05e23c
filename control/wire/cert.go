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

// A certificate is renewed once RenewalFraction of its validity (NotBefore
// to NotAfter) has passed, and its holder looks again at most every
// MaxRenewalWait: a year's certificate is replaced well before two thirds
// of its life, whatever the holder's clock did meanwhile (a board without a
// real-time clock may set it long after boot).
const (
	RenewalFraction = 0.6
	MaxRenewalWait  = time.Hour
)

// RenewAt is when cert is due for renewal: RenewalFraction into its
// validity.
func RenewAt(cert *x509.Certificate) time.Time {
	validity := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(time.Duration(float64(validity) * RenewalFraction))
}

// RenewalDue reports whether cert is due for renewal at now (RenewAt).
func RenewalDue(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(RenewAt(cert))
}

// RenewalWait is how long the holder of cert waits at now before it looks
// at its renewal again: until RenewAt, at most MaxRenewalWait, and, once
// due (a renewal that failed), a fiftieth of its validity, between a second
// and a minute.
func RenewalWait(cert *x509.Certificate, now time.Time) time.Duration {
	if d := RenewAt(cert).Sub(now); d > 0 {
		return min(d, MaxRenewalWait)
	}
	return min(max(cert.NotAfter.Sub(cert.NotBefore)/50, time.Second), time.Minute)
}

// CertExpiryMetric is the gauge servers and agents export on /metrics for
// each certificate they hold: the seconds until it expires (negative:
// expired), labelled certificate=<kind>. A server warns of the CA a year
// ahead; an alert rule can watch the others.
const (
	CertExpiryMetric = "isle_certificate_expiry_seconds"
	CertExpiryHelp   = "Seconds until the certificate expires (negative: expired), by kind of certificate."
)

// The kinds of certificates isle holds, as CertExpiryMetric and `isle
// certs check` name them.
const (
	CertKindCA         = "ca"                    // the cluster CA
	CertKindServing    = "apiserver-serving"     // an API server's
	CertKindNodeClient = "apiserver-node-client" // the API servers' client certificate to the streaming servers
	CertKindNode       = "node-serving"          // a board's streaming server's
	CertKindKubeconfig = "kubeconfig"            // an administrator's kubeconfig's client certificate
)

// ParseCertPEM parses the first PEM block, which must be a certificate.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	c, _, err := parseOneCert(data)
	return c, err
}

// parseOneCert parses the first PEM certificate of data, and returns the
// rest.
func parseOneCert(data []byte) (*x509.Certificate, []byte, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, nil, errors.New("certificate: no PEM block found")
	}
	if block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("certificate: PEM block is %q, want %q", block.Type, "CERTIFICATE")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: %w", err)
	}
	return cert, rest, nil
}
