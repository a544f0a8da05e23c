package pki

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// raftHandshake runs one TLS handshake between a dialer presenting client and
// an acceptor of cfg, as the Raft transport does, and returns both ends'
// errors and what each side's peerID made of the other.
func raftHandshake(t *testing.T, client, server *tls.Config, peerID func(tls.ConnectionState) (uint64, error)) (serverErr, clientErr error, fromID uint64) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	a, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	done := make(chan error, 1)
	go func() {
		s := tls.Server(b, server)
		err := s.Handshake()
		if err == nil {
			fromID, err = peerID(s.ConnectionState())
		}
		if err != nil {
			b.Close()
		}
		done <- err
	}()
	c := tls.Client(a, client)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	clientErr = c.Handshake()
	if clientErr != nil {
		a.Close()
	}
	serverErr = <-done
	return serverErr, clientErr, fromID
}

func TestMemberCertificate(t *testing.T) {
	ca := mustCA(t, "isle")
	leaf, err := ca.MemberLeaf(0xc1, 0x1234, "pi1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cid, mid, err := MemberOf(leaf.Current())
	if err != nil || cid != 0xc1 || mid != 0x1234 {
		t.Fatalf("MemberOf = %x, %x, %v; want c1, 1234", cid, mid, err)
	}
	if _, _, err := ca.IssueMember(0, 1, "x", time.Now()); err == nil {
		t.Error("a member certificate without a cluster ID was issued")
	}
	members := map[uint64]bool{0x1234: true, 0x5678: true}
	isMember := func(id uint64) bool { return members[id] }
	serverCfg, peerID := RaftConfig(ca, leaf, 0xc1, isMember)

	t.Run("a member of the cluster", func(t *testing.T) {
		other, err := ca.MemberLeaf(0xc1, 0x5678, "pi2", nil)
		if err != nil {
			t.Fatal(err)
		}
		clientCfg, _ := RaftConfig(ca, other, 0xc1, isMember)
		serr, cerr, id := raftHandshake(t, clientCfg, serverCfg, peerID)
		if serr != nil || cerr != nil || id != 0x5678 {
			t.Fatalf("server %v, client %v, peer %x; want 5678", serr, cerr, id)
		}
	})

	// What must not pass: each presented by a dialer.
	otherCA := mustCA(t, "other")
	foreign, _ := otherCA.MemberLeaf(0xc1, 0x5678, "pi2", nil)
	otherCluster, _ := ca.MemberLeaf(0xc2, 0x5678, "pi2", nil)
	removed, _ := ca.MemberLeaf(0xc1, 0x9999, "gone", nil)
	admin, _ := ca.ClientLeaf("isle-admin", []string{"system:masters"}, nil)
	serving, _ := ca.ServingLeaf("pi1", nil, nil, nil)
	for _, tc := range []struct {
		name string
		leaf *Leaf
		want string
	}{
		{"a member certificate of another CA", foreign, "unknown authority"},
		{"a member of another cluster", otherCluster, "a member of cluster c2, not of this cluster (c1)"},
		{"a former member", removed, "member 9999 is not a member of the store"},
		{"an administrator's client certificate", admin, "not a store member's certificate"},
		{"a serving certificate", serving, "not a store member's certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientCfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tc.leaf.Get() }}
			serr, _, _ := raftHandshake(t, clientCfg, serverCfg, peerID)
			if serr == nil || !strings.Contains(serr.Error(), tc.want) {
				t.Fatalf("the acceptor's error %v, want one with %q", serr, tc.want)
			}
		})
	}
	t.Run("no certificate", func(t *testing.T) {
		serr, _, _ := raftHandshake(t, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}, serverCfg, peerID)
		if serr == nil {
			t.Fatal("a dialer without a certificate was taken")
		}
	})
	t.Run("the dialer checks the acceptor too", func(t *testing.T) {
		clientCfg, _ := RaftConfig(ca, leaf, 0xc1, isMember)
		acceptor, _ := RaftConfig(otherCA, foreign, 0xc1, isMember)
		_, cerr, _ := raftHandshake(t, clientCfg, acceptor, peerID)
		if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
			t.Fatalf("the dialer's error %v, want unknown authority", cerr)
		}
	})
	t.Run("after the CA is replaced, both CAs' members", func(t *testing.T) {
		next, err := NewKeyPair("isle-next", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		old := ca.Signer().Cert
		ca.Rotate(next, old)
		fresh, _ := ca.MemberLeaf(0xc1, 0x5678, "pi2", nil)
		if fresh.Current().Issuer.CommonName != "isle-next" {
			t.Fatalf("issued by %q", fresh.Current().Issuer.CommonName)
		}
		for _, l := range []*Leaf{fresh, leaf} {
			clientCfg, _ := RaftConfig(ca, l, 0xc1, isMember)
			if serr, cerr, _ := raftHandshake(t, clientCfg, serverCfg, peerID); serr != nil || cerr != nil {
				t.Fatalf("a member of %s: server %v, client %v", l.Current().Issuer.CommonName, serr, cerr)
			}
		}
	})
}
