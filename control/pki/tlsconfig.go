package pki

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ServerConfig returns a TLS server configuration that serves leaf's
// certificate (renewed when due), followed by the CA certificate so that
// joiners can pin it (wire.PinnedClientConfig): TLS 1.2 or later (1.3
// whenever the client supports it), and client certificates verified
// against the CA when clients present one (tls.VerifyClientCertIfGiven),
// so that clients without one can still authenticate with a bearer token.
//
// NextProtos is left empty: http.Server.ServeTLS adds "h2" and "http/1.1".
func ServerConfig(ca *CA, leaf *Leaf) (*tls.Config, error) {
	if ca == nil || ca.Cert == nil {
		return nil, errors.New("pki: server config: no CA certificate")
	}
	if leaf == nil {
		return nil, errors.New("pki: server config: no serving certificate")
	}
	var (
		mu    sync.Mutex
		last  *tls.Certificate
		chain *tls.Certificate
	)
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := leaf.Get()
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if c != last {
			// Send the CA after the leaf, for PinnedClientConfig.
			withCA := *c
			withCA.Certificate = append(slices.Clone(c.Certificate[:1]), ca.Cert.Raw)
			last, chain = c, &withCA
		}
		return chain, nil
	}
	if _, err := get(nil); err != nil {
		return nil, fmt.Errorf("pki: server config: %w", err)
	}
	if err := leaf.Current().CheckSignatureFrom(ca.Cert); err != nil {
		return nil, fmt.Errorf("pki: server config: %s is not signed by CA %q: %w", leaf.name, ca.Cert.Subject.CommonName, err)
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: get,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      ca.Pool(),
	}, nil
}

// ClientConfig returns a TLS client configuration that trusts only the CA
// and presents leaf's client certificate (renewed when due), so that a
// server running for years never presents an expired one. Set ServerName
// (on a clone) to the name the server must have.
func ClientConfig(ca *CA, leaf *Leaf) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return leaf.Get() }}
}
