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
func PinnedClientConfig(caHash string, serverName string) *tls.Config {
	want := normalizeHash(caHash)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// The standard verification needs a root pool the joiner does not
		// have yet; VerifyConnection does the pinned verification instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, want, serverName)
		},
	}
}

func verifyPinned(certs []*x509.Certificate, wantHash, serverName string) error {
	if len(certs) == 0 {
		return errors.New("wire: pinned verify: server sent no certificate")
	}
	if wantHash == "" {
		return errors.New("wire: pinned verify: empty CA hash")
	}
	leaf := certs[0]
	var ca *x509.Certificate
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		if ca == nil && c.IsCA && CAHash(c) == wantHash {
			ca = c
			continue
		}
		intermediates.AddCert(c)
	}
	if ca == nil {
		return fmt.Errorf("wire: pinned verify: server's chain has no CA certificate with hash %s", wantHash)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	opts := x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       serverName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
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
