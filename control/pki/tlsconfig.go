package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/isle-cluster/isle/control/wire"
)

// ServerConfig returns a TLS server configuration that serves leaf's
// certificate (renewed when due), followed by the CA certificate so that
// joiners can pin it (wire.PinnedClientConfig): TLS 1.2 or later (1.3
// whenever the client supports it), and client certificates verified
// against the CA when clients present one (tls.VerifyClientCertIfGiven),
// so that clients without one can still authenticate with a bearer token.
//
// The configuration of each handshake comes from GetConfigForClient, with
// the client CAs trusted at that moment (both while the CA is replaced)
// and NextProtos "h2" and "http/1.1", as http.Server.ServeTLS sets them.
func ServerConfig(ca *CA, leaf *Leaf) (*tls.Config, error) {
	if ca == nil || ca.Signer() == nil {
		return nil, errors.New("pki: server config: no CA certificate")
	}
	if leaf == nil {
		return nil, errors.New("pki: server config: no serving certificate")
	}
	var (
		mu          sync.Mutex
		last        *tls.Certificate
		lastTrusted []*x509.Certificate
		chain       *tls.Certificate
	)
	// The chain is the leaf, its CA, and the other CA trusted while the
	// CA is replaced: a joiner pinning either finds it.
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := leaf.Get()
		if err != nil {
			return nil, err
		}
		trusted := ca.Trusted()
		mu.Lock()
		defer mu.Unlock()
		if c != last || !slices.EqualFunc(trusted, lastTrusted, (*x509.Certificate).Equal) {
			withCA := *c
			withCA.Certificate = slices.Clone(c.Certificate[:1])
			issuer := ca.IssuedBy(c.Leaf)
			if issuer != nil {
				withCA.Certificate = append(withCA.Certificate, issuer.Raw)
			}
			for _, t := range trusted {
				if issuer == nil || !t.Equal(issuer) {
					withCA.Certificate = append(withCA.Certificate, t.Raw)
				}
			}
			last, lastTrusted, chain = c, trusted, &withCA
		}
		return chain, nil
	}
	if _, err := get(nil); err != nil {
		return nil, fmt.Errorf("pki: server config: %w", err)
	}
	if ca.IssuedBy(leaf.Current()) == nil {
		return nil, fmt.Errorf("pki: server config: %s is not signed by CA %q", leaf.name, ca.Cert().Subject.CommonName)
	}
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: get,
		ClientAuth:     tls.VerifyClientCertIfGiven,
	}
	// The clients' CAs are those trusted at each handshake: while the CA
	// is replaced, both.
	var (
		pmu     sync.Mutex
		trusted []*x509.Certificate
		current *tls.Config
	)
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		t := ca.Trusted()
		pmu.Lock()
		defer pmu.Unlock()
		if current == nil || !slices.EqualFunc(t, trusted, (*x509.Certificate).Equal) {
			c := base.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs = ca.Pool()
			c.NextProtos = []string{"h2", "http/1.1"}
			trusted, current = t, c
		}
		return current, nil
	}
	base.ClientCAs = ca.Pool()
	return base, nil
}

// ClientConfig returns a client TLS configuration presenting the client
// certificate leaf holds (renewed as due) and verifying the server by the
// CAs trusted at each handshake.
func ClientConfig(ca *CA, leaf *Leaf) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return leaf.Get() },
		// The standard verification takes a fixed pool; VerifyConnection
		// does it with the pool of the moment instead.
		InsecureSkipVerify: true,
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return wire.VerifyServer(cs, ca.Pool(), cfg.Time)
	}
	return cfg
}
