package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// Leaf is a certificate of the CA, with its key, that a long-running
// process holds and hands to TLS: Get returns it, issued anew (a fresh key)
// once its renewal is due (wire.RenewalDue, three fifths into its life),
// and Run renews it ahead of handshakes. Connections made with the old one
// go on; the next handshake gets the new one. Nothing restarts.
//
// The API servers' serving and client certificates are Leafs; so will be
// the Raft members' certificates when the store's traffic gets mutual TLS
// (a ServingLeaf and a ClientLeaf per member, handed to the transport's
// tls.Config the way ServerConfig and ClientConfig do).
type Leaf struct {
	name  string // what it is, for errors and logs
	issue func(now time.Time) (certPEM, keyPEM []byte, err error)
	now   func() time.Time
	// issued, if set, is called with each new certificate (PEM).
	issued func(certPEM []byte)
	// current reports whether a certificate is of the CA that signs now:
	// one of a CA being replaced is due at once.
	current func(*x509.Certificate) bool

	mu   sync.Mutex
	cert *tls.Certificate
}

// ServingLeaf returns a Leaf of IssueServing's serving certificates for
// commonName, dnsNames and ips. It issues the first one at once, to report
// a CA that cannot issue. now nil: time.Now.
func (ca *CA) ServingLeaf(commonName string, dnsNames []string, ips []net.IP, now func() time.Time) (*Leaf, error) {
	dnsNames, ips = slices.Clone(dnsNames), slices.Clone(ips)
	return newLeaf("serving certificate "+commonName, func(t time.Time) ([]byte, []byte, error) {
		return ca.IssueServing(commonName, dnsNames, ips, t)
	}, ca.SignedByCurrent, now)
}

// ClientLeaf returns a Leaf of IssueClient's client certificates for the
// user commonName in the groups orgs. It issues the first one at once, to
// report a CA that cannot issue. now nil: time.Now.
func (ca *CA) ClientLeaf(commonName string, orgs []string, now func() time.Time) (*Leaf, error) {
	orgs = slices.Clone(orgs)
	return newLeaf("client certificate "+commonName, func(t time.Time) ([]byte, []byte, error) {
		return ca.IssueClient(commonName, orgs, t)
	}, ca.SignedByCurrent, now)
}

func newLeaf(name string, issue func(time.Time) ([]byte, []byte, error), current func(*x509.Certificate) bool, now func() time.Time) (*Leaf, error) {
	if now == nil {
		now = time.Now
	}
	l := &Leaf{name: name, issue: issue, current: current, now: now}
	if _, err := l.Get(); err != nil {
		return nil, err
	}
	return l, nil
}

// OnIssue calls f with every certificate (PEM) issued from now on, the
// current one first (a server saves it for `isle certs check`). f runs with
// the Leaf locked: it must not call the Leaf.
func (l *Leaf) OnIssue(f func(certPEM []byte)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.issued = f
	f(encodeCert(l.cert.Leaf.Raw))
}

// Get returns the certificate, renewed first when due (or of a CA being
// replaced). A failed renewal
// keeps the current certificate while it is valid (the next call tries
// again) and is an error once it has expired.
func (l *Leaf) Get() (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.cert != nil && !wire.RenewalDue(l.cert.Leaf, now) && l.current(l.cert.Leaf) {
		return l.cert, nil
	}
	certPEM, keyPEM, err := l.issue(now)
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.X509KeyPair(certPEM, keyPEM); err == nil {
			l.cert = &pair
			if l.issued != nil {
				l.issued(certPEM)
			}
			return l.cert, nil
		}
	}
	if l.cert != nil && now.Before(l.cert.Leaf.NotAfter) {
		return l.cert, nil
	}
	return nil, fmt.Errorf("pki: %s: %w", l.name, err)
}

// Current is the certificate now held, renewed or not.
func (l *Leaf) Current() *x509.Certificate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cert.Leaf
}

// Run renews the certificate when due until ctx ends, so that it is
// renewed even when no handshake asks for it, and what `isle certs check`
// and the metrics show is true. It looks every wire.RenewalWait.
func (l *Leaf) Run(ctx context.Context, log *slog.Logger) {
	for {
		cur := l.Current()
		t := time.NewTimer(wire.RenewalWait(cur, l.now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if c, err := l.Get(); err != nil {
			log.Error("pki: certificate expired and not renewed", "certificate", l.name, "err", err)
		} else if c.Leaf != cur {
			log.Info("pki: certificate renewed", "certificate", l.name, "expires", c.Leaf.NotAfter)
		} else if wire.RenewalDue(cur, l.now()) {
			log.Warn("pki: certificate due for renewal, not renewed; trying again", "certificate", l.name, "expires", cur.NotAfter)
		}
	}
}
