package transport

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// selfSignedTLS returns a mutual-TLS config trusting only its own freshly
// generated certificate for 127.0.0.1.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "isle test member"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

func TestTLS(t *testing.T) {
	shared := selfSignedTLS(t)
	t.Run("mutual TLS carries messages and snapshots", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS = shared })
		b := newNode(t, 2, func(c *Config) { c.TLS = shared })
		link(t, a, b)
		for i := range 100 {
			a.Send([]raftpb.Message{appMsg(1, 2, uint64(i+1), 64)})
		}
		a.Send([]raftpb.Message{snapMsg(1, 2, 500, 256<<10)})
		waitFor(t, "messages over TLS", func() bool { return b.h.count() == 101 })
		waitFor(t, "snapshot report", func() bool { return len(a.h.snapshotReports()) == 1 })
		if r := a.h.snapshotReports()[0]; r.status != etcdraft.SnapshotFinish {
			t.Fatalf("snapshot over TLS: %+v", r)
		}
		for i, m := range b.h.messages()[:100] {
			if m.Index != uint64(i+1) {
				t.Fatalf("message %d has index %d", i, m.Index)
			}
		}
	})
	tests := []struct {
		name      string
		senderTLS *tls.Config
		wantLog   string // in the receiver's log
		senderLog string // in the sender's log
	}{
		{"plain TCP sender is refused", nil, "a connection without TLS (first byte 0x49)", "cannot connect to peer"},
		{"untrusted certificate is refused", selfSignedTLS(t), "tls: bad certificate", "certificate signed by unknown authority"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t, 1, func(c *Config) { c.TLS = tc.senderTLS })
			b := newNode(t, 2, func(c *Config) { c.TLS = shared })
			a.AddPeer(2, b.addr)
			waitFor(t, "receiver to log %q", func() bool { return b.logs.contains(tc.wantLog) }, tc.wantLog)
			waitFor(t, "sender to log %q", func() bool { return a.logs.contains(tc.senderLog) }, tc.senderLog)
			waitFor(t, "sender to report 2 unreachable", func() bool { return a.h.unreachableCount(2) > 0 })
			if a.peer(2).connected.Load() {
				t.Fatal("stream established without a valid TLS handshake")
			}
			if b.h.count() != 0 {
				t.Fatal("receiver accepted messages")
			}
		})
	}
}

// TestTLSPeerID checks that a certificate is bound to a member: a
// connection whose handshake claims another member than the peer's
// certificate names is refused on either side before a message passes,
// and a member may not send messages in another's name.
func TestTLSPeerID(t *testing.T) {
	shared := selfSignedTLS(t)
	certIs := func(id uint64) func(tls.ConnectionState) (uint64, error) {
		return func(cs tls.ConnectionState) (uint64, error) {
			if len(cs.PeerCertificates) == 0 {
				return 0, errors.New("no certificate")
			}
			return id, nil
		}
	}
	t.Run("the acceptor refuses a handshake in another member's name", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS, c.PeerID = shared, certIs(2) })
		b := newNode(t, 2, func(c *Config) { c.TLS, c.PeerID = shared, certIs(9) })
		a.AddPeer(2, b.addr)
		want := "peer claims ID 1, its certificate is member 9's"
		waitFor(t, "receiver to log %q", func() bool { return b.logs.contains(want) }, want)
		if b.h.count() != 0 {
			t.Fatal("receiver accepted messages")
		}
	})
	t.Run("the dialer refuses a peer that is not the member dialed", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS, c.PeerID = shared, certIs(3) })
		b := newNode(t, 2, func(c *Config) { c.TLS, c.PeerID = shared, certIs(1) })
		a.AddPeer(2, b.addr)
		want := "the certificate is member 3's, not 2's"
		waitFor(t, "sender to log %q", func() bool { return a.logs.contains(want) }, want)
		if a.peer(2).connected.Load() {
			t.Fatal("stream established to the wrong member")
		}
	})
	t.Run("a message in another member's name closes the stream", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS, c.PeerID = shared, certIs(2) })
		b := newNode(t, 2, func(c *Config) { c.TLS, c.PeerID = shared, certIs(1) })
		a.AddPeer(2, b.addr)
		waitConnected(t, a, 2)
		a.Send([]raftpb.Message{appMsg(1, 2, 1, 8), appMsg(5, 2, 2, 8)})
		want := "MsgApp from 5 on the connection of member 1"
		waitFor(t, "receiver to log %q", func() bool { return b.logs.contains(want) }, want)
		if n := b.h.count(); n != 1 {
			t.Fatalf("receiver took %d messages, want the first alone", n)
		}
	})
}

// TestTLSAllowPlain checks the rolling upgrade from members without TLS:
// while AllowPlain allows it, a plain dialer is served and a plain
// acceptor is dialed in plain TCP; once it does not, neither.
func TestTLSAllowPlain(t *testing.T) {
	shared := selfSignedTLS(t)
	var allow atomic.Bool
	allow.Store(true)
	plainOK := func() bool { return allow.Load() }
	t.Run("a plain dialer is served", func(t *testing.T) {
		a := newNode(t, 1, nil)
		b := newNode(t, 2, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		a.AddPeer(2, b.addr)
		waitConnected(t, a, 2)
		a.Send([]raftpb.Message{appMsg(1, 2, 1, 8)})
		waitFor(t, "the message over plain TCP", func() bool { return b.h.count() == 1 })
	})
	t.Run("a plain acceptor is dialed in plain TCP", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		b := newNode(t, 2, nil)
		a.AddPeer(2, b.addr)
		waitConnected(t, a, 2)
		a.Send([]raftpb.Message{appMsg(1, 2, 1, 8)})
		waitFor(t, "the message over plain TCP", func() bool { return b.h.count() == 1 })
	})
	t.Run("TLS members use TLS", func(t *testing.T) {
		a := newNode(t, 1, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		b := newNode(t, 2, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		link(t, a, b)
		a.Send([]raftpb.Message{appMsg(1, 2, 1, 8)})
		waitFor(t, "the message", func() bool { return b.h.count() == 1 })
		if got := testutil.ToFloat64(a.metrics.plain) + testutil.ToFloat64(b.metrics.plain); got != 0 {
			t.Fatalf("%v plain connections between members that both speak TLS", got)
		}
	})
	t.Run("once plain is over, neither", func(t *testing.T) {
		allow.Store(false)
		a := newNode(t, 1, nil)
		b := newNode(t, 2, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		a.AddPeer(2, b.addr)
		waitFor(t, "receiver to refuse", func() bool { return b.logs.contains("a connection without TLS") })
		c := newNode(t, 3, func(c *Config) { c.TLS, c.AllowPlain = shared, plainOK })
		d := newNode(t, 4, nil)
		c.AddPeer(4, d.addr)
		waitFor(t, "dialer to fail", func() bool { return c.h.unreachableCount(4) > 0 })
		if b.h.count() != 0 || a.peer(2).connected.Load() || c.peer(4).connected.Load() {
			t.Fatal("a plain connection was made after AllowPlain turned false")
		}
	})
}
