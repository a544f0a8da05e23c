package wire

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"
)

// TimePath is where a server tells its time (GET, no authentication: the
// time is no secret), to a board whose clock may be far behind: a
// Raspberry Pi has no real-time clock. The answer is a TimeResponse.
//
// Why this channel and not SNTP (RFC 4330) on a server port: an SNTP
// answer is unauthenticated UDP that any host of the LAN can forge, so a
// board could let it do next to nothing; it would also be one more port
// to open. This answer comes over TLS from a server that proved it holds
// the key of a certificate of the cluster's CA, on the API port every
// board reaches anyway. A board cannot check that certificate's dates
// with a clock it does not trust yet, so TimeClientConfig checks the
// chain at a moment it may be valid, and CheckServerTime accepts only a
// time at which the certificate and the CA are both valid and which is
// not before what the board knows (a day before isle's build): a forged
// time needs a key of the cluster, and even then stays within a
// certificate's year.
const TimePath = "/isle/v1/time"

// TimeResponse is a server's time.
type TimeResponse struct {
	Time time.Time `json:"time"`
}

// TimeClientConfig is PinnedClientConfig for a board that does not trust
// its clock yet: the server's chain must hold the CA of hash caHash and
// verify by it at the first moment both are valid that is not before
// floor (a day before isle's build, say); there must be one. Then the time the
// server tells goes through CheckServerTime.
func TimeClientConfig(caHash string, floor time.Time) *tls.Config {
	want := normalizeHash(caHash)
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // see PinnedClientConfig
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, _, err := timeWindow(cs.PeerCertificates, want, floor)
			return err
		},
	}
}

// CheckServerTime checks the time t a server told at TimePath over a
// connection of TimeClientConfig, whose certificates (the connection's
// PeerCertificates) are certs: t must be within the validity of the
// server's certificate and of the CA of hash caHash, and not before floor.
func CheckServerTime(t time.Time, certs []*x509.Certificate, caHash string, floor time.Time) error {
	from, to, err := timeWindow(certs, normalizeHash(caHash), floor)
	if err != nil {
		return err
	}
	if t.Before(from) || t.After(to) {
		return fmt.Errorf("wire: server time %s refused: not from %s to %s, when its certificate and the CA are both valid and isle was built",
			t.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	return nil
}

// timeWindow verifies a server's chain by the CA of hash wantHash at the
// first moment not before floor when the leaf and the CA are both valid,
// and returns the moments [from, to] they both are.
func timeWindow(certs []*x509.Certificate, wantHash string, floor time.Time) (from, to time.Time, err error) {
	leaf, ca, opts, err := pinnedChain(certs, wantHash, "")
	if err != nil {
		return from, to, fmt.Errorf("wire: server time: %w", err)
	}
	from, to = leaf.NotBefore, leaf.NotAfter
	for _, t := range []time.Time{ca.NotBefore, floor} {
		if t.After(from) {
			from = t
		}
	}
	if ca.NotAfter.Before(to) {
		to = ca.NotAfter
	}
	if from.After(to) {
		return from, to, fmt.Errorf("wire: server time: the server's certificate (valid from %s to %s) is not valid at any time after isle's build (%s) and within the CA's validity",
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), floor.UTC().Format(time.RFC3339))
	}
	opts.CurrentTime = from
	if _, err := leaf.Verify(opts); err != nil {
		return from, to, fmt.Errorf("wire: server time: server certificate: %w", err)
	}
	return from, to, nil
}
