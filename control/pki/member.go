package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A store member's certificate names its cluster and member ID in one URI
// SAN, isle-raft://<cluster ID>/<member ID> (both hex), and serves for
// both ends of a Raft connection (server and client authentication). Only
// the servers hold the CA key, so only they issue one; no other
// certificate of the cluster carries such a URI.
const memberURIScheme = "isle-raft"

// IssueMember issues the store member certificate of member memberID of
// cluster clusterID, named name, valid for the CA's LeafValidity, with a
// fresh P-256 key.
func (ca *CA) IssueMember(clusterID, memberID uint64, name string, now time.Time) (certPEM, keyPEM []byte, err error) {
	if clusterID == 0 || memberID == 0 || name == "" {
		return nil, nil, errors.New("pki: issue member certificate: cluster ID, member ID and name are required")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "isle-store-member:" + name},
		URIs:        []*url.URL{{Scheme: memberURIScheme, Host: strconv.FormatUint(clusterID, 16), Path: "/" + strconv.FormatUint(memberID, 16)}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	certPEM, keyPEM, err = ca.issue(tmpl, now)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue member certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// MemberLeaf returns a Leaf of IssueMember's certificates. now nil:
// time.Now.
func (ca *CA) MemberLeaf(clusterID, memberID uint64, name string, now func() time.Time) (*Leaf, error) {
	return newLeaf("store member certificate "+name, func(t time.Time) ([]byte, []byte, error) {
		return ca.IssueMember(clusterID, memberID, name, t)
	}, ca.SignedByCurrent, now)
}

// MemberOf returns the cluster and member IDs a member certificate names.
func MemberOf(cert *x509.Certificate) (clusterID, memberID uint64, err error) {
	var found *url.URL
	for _, u := range cert.URIs {
		if u.Scheme == memberURIScheme {
			if found != nil {
				return 0, 0, errors.New("more than one store member named")
			}
			found = u
		}
	}
	if found == nil {
		return 0, 0, errors.New("not a store member's certificate")
	}
	clusterID, cerr := strconv.ParseUint(found.Host, 16, 64)
	memberID, merr := strconv.ParseUint(strings.TrimPrefix(found.Path, "/"), 16, 64)
	if cerr != nil || merr != nil || clusterID == 0 || memberID == 0 {
		return 0, 0, fmt.Errorf("a malformed store member name %q", found.String())
	}
	return clusterID, memberID, nil
}

// RaftConfig returns the TLS configuration of the store's Raft links,
// for both ends: each presents leaf's member certificate and requires
// the peer's, verified by the CAs trusted at that handshake (both while
// the CA is replaced) and naming a member of cluster clusterID; TLS 1.3.
// peerID returns the member the peer's certificate names, once isMember
// accepts it.
func RaftConfig(ca *CA, leaf *Leaf, clusterID uint64, isMember func(uint64) bool) (cfg *tls.Config, peerID func(tls.ConnectionState) (uint64, error)) {
	verify := func(cs tls.ConnectionState) (uint64, error) {
		if len(cs.PeerCertificates) == 0 {
			return 0, errors.New("no certificate")
		}
		cert := cs.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, CurrentTime: leaf.now(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			return 0, err
		}
		cid, mid, err := MemberOf(cert)
		switch {
		case err != nil:
			return 0, err
		case cid != clusterID:
			return 0, fmt.Errorf("a member of cluster %x, not of this cluster (%x)", cid, clusterID)
		}
		return mid, nil
	}
	cfg = &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return leaf.Get() },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return leaf.Get() },
		ClientAuth:           tls.RequireAnyClientCert,
		// The standard verification takes a fixed pool and a host name;
		// VerifyConnection checks the chain with the pool of the moment
		// and the member name instead, on both ends.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := verify(cs)
			return err
		},
	}
	peerID = func(cs tls.ConnectionState) (uint64, error) {
		id, err := verify(cs)
		if err == nil && !isMember(id) {
			err = fmt.Errorf("member %x is not a member of the store", id)
		}
		return id, err
	}
	return cfg, peerID
}
