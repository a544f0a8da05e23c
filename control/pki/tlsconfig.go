package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ServerConfig returns the API server's TLS configuration: TLS 1.2 or later
// (1.3 is negotiated whenever the client supports it), serving certPEM/keyPEM
// followed by the CA certificate so that joiners can pin it, and verifying
// client certificates against the CA when clients present one
// (tls.VerifyClientCertIfGiven), so that clients without one can still
// authenticate with a bearer token. The serving certificate must be signed
// by ca; validity dates are not checked here.
//
// NextProtos is left empty: http.Server.ServeTLS adds "h2" and "http/1.1".
func ServerConfig(ca *CA, certPEM, keyPEM []byte) (*tls.Config, error) {
	if ca == nil || ca.Cert == nil {
		return nil, errors.New("pki: server config: no CA certificate")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: server config: serving key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("pki: server config: serving certificate: %w", err)
	}
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, fmt.Errorf("pki: server config: serving certificate %q is not signed by CA %q: %w",
			leaf.Subject.CommonName, ca.Cert.Subject.CommonName, err)
	}
	pair.Leaf = leaf
	// Send the CA after the leaf (once), for PinnedClientConfig.
	var chain [][]byte
	for _, der := range pair.Certificate {
		if !bytes.Equal(der, ca.Cert.Raw) {
			chain = append(chain, der)
		}
	}
	pair.Certificate = append(chain, ca.Cert.Raw)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
	}, nil
}
