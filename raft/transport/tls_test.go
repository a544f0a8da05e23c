package transport

import (
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
		{"plain TCP sender is refused", nil, "first record does not look like a TLS handshake", "cannot connect to peer"},
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
