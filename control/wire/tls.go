package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrClock is a pinned verification that failed only on time: the
// server's certificates are of the pinned CA, but this machine's clock is
// outside their validity. A board without a clock battery that has not
// reached an NTP server yet starts from an old time.
var ErrClock = errors.New("this board's clock is outside the validity of the server's certificates (is its time set? a board without a clock battery takes it from NTP)")

// PinnedClientConfig returns a TLS client configuration for a joiner that
// knows only the CA hash from a join token. The handshake succeeds only if
// the server's chain contains a CA certificate whose CAHash equals caHash
// ("sha256:<hex>"; compared case-insensitively) and the server's leaf
// certificate verifies against that CA for server authentication and, if
// serverName is not empty, for serverName (a DNS name or an IP address).
// The certificates are checked at now() (nil: the system's time), the
// board's clock.
func PinnedClientConfig(caHash string, serverName string, now func() time.Time) *tls.Config {
	want := normalizeHash(caHash)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		Time:       now,
		// The standard verification needs a root pool the joiner does not
		// have yet; VerifyConnection does the pinned verification instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			var at time.Time
			if now != nil {
				at = now()
			}
			return verifyPinned(cs.PeerCertificates, want, serverName, at)
		},
	}
}

// pinnedChain finds in a server's chain its leaf and the CA of hash
// wantHash, and returns them with the options to verify the leaf by that
// CA (at the current time; set CurrentTime for another).
func pinnedChain(certs []*x509.Certificate, wantHash, serverName string) (leaf, ca *x509.Certificate, opts x509.VerifyOptions, err error) {
	if len(certs) == 0 {
		return nil, nil, opts, errors.New("server sent no certificate")
	}
	if wantHash == "" {
		return nil, nil, opts, errors.New("empty CA hash")
	}
	leaf = certs[0]
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		if ca == nil && c.IsCA && CAHash(c) == wantHash {
			ca = c
			continue
		}
		intermediates.AddCert(c)
	}
	if ca == nil {
		return nil, nil, opts, fmt.Errorf("server's chain has no CA certificate with hash %s: a wrong token, or the cluster's CA was replaced (isle certs rotate-ca): take the token from a server's DATA/token", wantHash)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return leaf, ca, x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       serverName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil
}

// verifyPinned verifies a server's chain by the CA of hash wantHash at
// now (the zero time: the system's time).
func verifyPinned(certs []*x509.Certificate, wantHash, serverName string, now time.Time) error {
	leaf, _, opts, err := pinnedChain(certs, wantHash, serverName)
	if err != nil {
		return fmt.Errorf("wire: pinned verify: %w", err)
	}
	opts.CurrentTime = now
	if _, err := leaf.Verify(opts); err != nil {
		// Only time: the chain verifies at the leaf's first or last
		// moment.
		for _, at := range []time.Time{leaf.NotBefore, leaf.NotAfter} {
			opts.CurrentTime = at
			if _, terr := leaf.Verify(opts); terr == nil {
				return fmt.Errorf("wire: pinned verify: server certificate: %w: %w", ErrClock, err)
			}
		}
		return fmt.Errorf("wire: pinned verify: server certificate: %w", err)
	}
	return nil
}

// normalizeHash lowercases a "sha256:<hex>" hash; a bare hex string gets
// the prefix.
func normalizeHash(h string) string {
	if h == "" {
		return ""
	}
	h = strings.ToLower(h)
	if len(h) == tokenHashHexLen {
		return hashPrefix + h
	}
	return h
}

// VerifyServer does what crypto/tls's verification of a server does, with
// roots: the chain to one of them, and the name the client asked for.
// now nil: time.Now.
func VerifyServer(cs tls.ConnectionState, roots *x509.CertPool, now func() time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("wire: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	if now != nil {
		opts.CurrentTime = now()
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("wire: the server's certificate: %w", err)
	}
	return nil
}
