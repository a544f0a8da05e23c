package pki

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/control/wire"
)

// TestRotate follows a replacement of the CA through the three phases:
// while both are trusted, clients and servers of either are accepted and
// the chain carries both; once the new one signs, the leaves and the
// kubeconfigs are issued anew from it at once; once the old one is
// dropped, its certificates are refused.
func TestRotate(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	old := ca.Signer()
	next, err := NewKeyPair("isle-ca", testNow)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.ServingLeaf("isle-apiserver", []string{"isle-1.local"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerConfig(ca, leaf)
	if err != nil {
		t.Fatal(err)
	}
	srv := startTLSServer(t, cfg)
	oldClient := pairOf(t, ca, "old-admin")
	adminCert, adminKey := mustClient(t, ca, "isle-admin", "system:masters")
	kubeconfig, err := Kubeconfig("isle", "https://10.0.0.1:6443", ca.CertPEM(), "isle-admin", adminCert, adminKey, "")
	if err != nil {
		t.Fatal(err)
	}
	nextCA := newCA(next)
	nextClient := pairOf(t, nextCA, "new-admin")
	asClient := func(c tls.Certificate) (string, error) {
		body, _, err := get(t, srv.URL, &tls.Config{RootCAs: ca.Pool(), ServerName: "isle-1.local", Certificates: []tls.Certificate{c}})
		return body, err
	}

	// Before: the new CA's client is anonymous at best (its certificate
	// does not verify: the handshake fails).
	if body, err := asClient(nextClient); err == nil {
		t.Errorf("a client of a CA not trusted yet: %q", body)
	}

	ca.Rotate(old, next.Cert)
	for name, c := range map[string]tls.Certificate{"old": oldClient, "new": nextClient} {
		if body, err := asClient(c); err != nil || !strings.HasPrefix(body, "CN="+name+"-admin") {
			t.Errorf("trust both: the %s CA's client: %q, %v", name, body, err)
		}
	}
	if got := wire.CAHashes(certsOf(t, ca.BundlePEM())); len(got) != 2 || got[0] != wire.CAHash(old.Cert) {
		t.Errorf("trust both: bundle %v, want the old CA first, then the new", got)
	}
	c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || len(c.Certificate) != 3 {
		t.Fatalf("trust both: a chain of %d certificates (%v), want the leaf and both CAs", len(c.Certificate), err)
	}
	if !ca.SignedByCurrent(leaf.Current()) {
		t.Error("trust both: the leaf is due while the old CA still signs")
	}
	// A client of the new CA's trust alone verifies the server (its
	// chain has the new CA, but the leaf is the old one's: not yet).
	if _, _, err := get(t, srv.URL, &tls.Config{RootCAs: nextCA.Pool(), ServerName: "isle-1.local"}); err == nil {
		t.Error("trust both: a client trusting the new CA alone verified a leaf of the old one")
	}

	ca.Rotate(next, old.Cert)
	before := leaf.Current()
	if _, err := leaf.Get(); err != nil {
		t.Fatal(err)
	}
	if leaf.Current() == before || ca.IssuedBy(leaf.Current()) == nil || !ca.SignedByCurrent(leaf.Current()) {
		t.Error("issue new: the leaf was not issued anew from the new CA")
	}
	if _, _, err := get(t, srv.URL, &tls.Config{RootCAs: nextCA.Pool(), ServerName: "isle-1.local"}); err != nil {
		t.Errorf("issue new: a client trusting the new CA alone: %v", err)
	}
	out, renewed, err := ca.RenewKubeconfig(kubeconfig, testNow)
	if err != nil || !renewed {
		t.Fatalf("issue new: kubeconfig renewed %v, %v", renewed, err)
	}
	if _, cert, err := parseKubeconfig(out); err != nil || !ca.SignedByCurrent(cert) {
		t.Errorf("issue new: the kubeconfig's client certificate is not the new CA's (%v)", err)
	}

	ca.Rotate(next)
	if body, err := asClient(oldClient); err == nil {
		t.Errorf("done: the old CA's client was accepted: %q", body)
	}
	if body, err := asClient(nextClient); err != nil {
		t.Errorf("done: the new CA's client: %q, %v", body, err)
	}
	out2, renewed, err := ca.RenewKubeconfig(out, testNow)
	if err != nil || !renewed {
		t.Fatalf("done: kubeconfig renewed %v, %v (its CA data holds both)", renewed, err)
	}
	if cfg, _, err := parseKubeconfig(out2); err != nil || string(cfg.Clusters[0].Cluster.CertificateAuthorityData) != string(next.CertPEM) {
		t.Errorf("done: the kubeconfig trusts %q (%v), want the new CA alone", cfg.Clusters[0].Cluster.CertificateAuthorityData, err)
	}
}

func certsOf(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	certs, err := wire.ParseCertsPEM(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

func pairOf(t *testing.T, ca *CA, user string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := mustClient(t, ca, user, "system:masters")
	return mustKeyPair(t, certPEM, keyPEM)
}
