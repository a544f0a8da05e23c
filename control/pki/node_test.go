package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

func TestIssueNodeServing(t *testing.T) {
	ca := mustCA(t, "isle")
	// The request asks for other names: the CA ignores them.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "kubernetes"}, DNSNames: []string{"kubernetes.default.svc", "pi9"},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	certPEM, err := ca.IssueNodeServing("pi2", csrPEM, testNow)
	if err != nil {
		t.Fatal(err)
	}
	cert := mustParseCert(t, certPEM)
	if cert.Subject.CommonName != "pi2" || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "pi2" || len(cert.IPAddresses) != 0 {
		t.Fatalf("subject %v, DNS names %v, IPs %v: want pi2 only", cert.Subject, cert.DNSNames, cert.IPAddresses)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Fatal("the certificate is not for the request's key")
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Fatalf("extended key usage %v, want server auth only", cert.ExtKeyUsage)
	}
	verify := func(name string, usage x509.ExtKeyUsage) error {
		_, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	if err := verify("pi2", x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatalf("verify for pi2: %v", err)
	}
	for _, name := range []string{"kubernetes.default.svc", "localhost", "127.0.0.1", "pi9"} {
		if verify(name, x509.ExtKeyUsageServerAuth) == nil {
			t.Errorf("the node's certificate is valid for %s", name)
		}
	}
	if verify("pi2", x509.ExtKeyUsageClientAuth) == nil {
		t.Error("the node's serving certificate is valid as a client certificate")
	}
}

func TestIssueNodeServingErrors(t *testing.T) {
	ca := mustCA(t, "isle")
	good, _, err := wire.NewCSR("pi2")
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "pi2"}}, p384)
	if err != nil {
		t.Fatal(err)
	}
	wrongCurve := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	block, _ := pem.Decode(good)
	tampered := append([]byte(nil), block.Bytes...)
	tampered[len(tampered)-5] ^= 0xff // in the signature
	certPEM, _ := mustServing(t, ca)

	tests := []struct {
		name, node string
		csr        []byte
		want       string
		reserved   bool
	}{
		{"reserved kubernetes.default.svc", "kubernetes.default.svc", good, "API server certificates carry", true},
		{"reserved localhost", "localhost", good, "API server certificates carry", true},
		{"empty name", "", good, "want a DNS name", false},
		{"upper case", "Pi2", good, "want a DNS name", false},
		{"wildcard", "*.pi", good, "no wildcard", false},
		{"no PEM", "pi2", []byte("hello"), "no PEM block", false},
		{"a certificate", "pi2", certPEM, `PEM block is "CERTIFICATE"`, false},
		{"bad signature", "pi2", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "certificate request", false},
		{"P-384 key", "pi2", wrongCurve, "want ECDSA P-256", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ca.IssueNodeServing(tc.node, tc.csr, testNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if errors.Is(err, ErrReservedName) != tc.reserved {
				t.Fatalf("errors.Is(%v, ErrReservedName) = %v", err, !tc.reserved)
			}
		})
	}
}

func TestRenewalDue(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(300 * time.Hour)}
	tests := []struct {
		at   time.Duration // after NotBefore
		want bool
	}{
		{-time.Hour, false}, // a clock behind
		{0, false},
		{179 * time.Hour, false},
		{180 * time.Hour, true}, // three fifths of its life
		{199 * time.Hour, true},
		{400 * time.Hour, true},
	}
	for _, tc := range tests {
		if got := wire.RenewalDue(cert, start.Add(tc.at)); got != tc.want {
			t.Errorf("at NotBefore%+v: %v, want %v", tc.at, got, tc.want)
		}
	}
}
