package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

func TestNewCAParseCARoundTrip(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	c := ca.Cert()
	if c.Subject.CommonName != "isle-ca" {
		t.Errorf("CN = %q, want isle-ca", c.Subject.CommonName)
	}
	if !c.IsCA || !c.BasicConstraintsValid {
		t.Errorf("IsCA = %v, BasicConstraintsValid = %v; want both true", c.IsCA, c.BasicConstraintsValid)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature; c.KeyUsage != want {
		t.Errorf("KeyUsage = %v, want %v", c.KeyUsage, want)
	}
	if c.PublicKeyAlgorithm != x509.ECDSA || ca.Signer().Key.Curve != elliptic.P256() {
		t.Errorf("key is %v on %v, want ECDSA P-256", c.PublicKeyAlgorithm, ca.Signer().Key.Curve.Params().Name)
	}
	if want := testNow.Add(CAValidity); !c.NotAfter.Equal(want) {
		t.Errorf("NotAfter = %v, want %v", c.NotAfter, want)
	}
	if want := testNow.Add(-ClockSkew); !c.NotBefore.Equal(want) {
		t.Errorf("NotBefore = %v, want %v", c.NotBefore, want)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}

	got, err := ParseCA(ca.CertPEM(), ca.Signer().KeyPEM)
	if err != nil {
		t.Fatalf("ParseCA: %v", err)
	}
	if !got.Cert().Equal(ca.Cert()) {
		t.Error("parsed certificate differs")
	}
	if !got.Signer().Key.Equal(ca.Signer().Key) {
		t.Error("parsed key differs")
	}
	if string(got.CertPEM()) != string(ca.CertPEM()) || string(got.Signer().KeyPEM) != string(ca.Signer().KeyPEM) {
		t.Error("parsed PEM differs from the original")
	}
}

func TestParseCAAcceptsKeyForms(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ca.Signer().Key)
	if err != nil {
		t.Fatal(err)
	}
	params, err := x509.MarshalPKIXPublicKey(ca.Signer().Key.Public()) // any bytes: the block is skipped
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		keyPEM []byte
	}{
		{"SEC1", ca.Signer().KeyPEM},
		{"PKCS8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})},
		{"EC PARAMETERS first", append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: params}), ca.Signer().KeyPEM...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCA(ca.CertPEM(), tc.keyPEM)
			if err != nil {
				t.Fatalf("ParseCA: %v", err)
			}
			if !got.Signer().Key.Equal(ca.Signer().Key) {
				t.Error("parsed key differs")
			}
			if string(got.Signer().KeyPEM) != string(ca.Signer().KeyPEM) {
				t.Error("KeyPEM is not the canonical SEC1 form")
			}
		})
	}
}

func TestParseCAErrors(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	other := mustCA(t, "other-ca")
	leafPEM, leafKeyPEM := mustServing(t, ca)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384DER, err := x509.MarshalECPrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		certPEM, keyPEM []byte
		want            string
	}{
		{"empty certificate", nil, ca.Signer().KeyPEM, "certificate: no PEM block found"},
		{"key as certificate", ca.Signer().KeyPEM, ca.Signer().KeyPEM, `PEM block is "EC PRIVATE KEY", want "CERTIFICATE"`},
		{"garbage certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), ca.Signer().KeyPEM, "certificate: x509:"},
		{"leaf certificate", leafPEM, leafKeyPEM, "is not a CA"},
		{"empty key", ca.CertPEM(), nil, "private key: no PEM block found"},
		{"certificate as key", ca.CertPEM(), ca.CertPEM(), `private key: PEM block is "CERTIFICATE"`},
		{"garbage key", ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("junk")}), "private key: x509:"},
		{"P-384 key", ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: p384DER}), "curve P-384, want P-256"},
		{"other CA's key", ca.CertPEM(), other.Signer().KeyPEM, "private key does not match certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCA(tc.certPEM, tc.keyPEM)
			if err == nil {
				t.Fatal("ParseCA succeeded, want error")
			}
			if !strings.HasPrefix(err.Error(), "pki: parse CA: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to start with %q and contain %q", err, "pki: parse CA: ", tc.want)
			}
		})
	}
}

func TestIssueServing(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	ips := []net.IP{net.ParseIP("192.168.1.10"), net.ParseIP("127.0.0.1"), net.ParseIP("fd00::10")}
	certPEM, keyPEM, err := ca.IssueServing("isle-apiserver", []string{"isle-1.local", "Localhost.", "api.isle"}, ips, testNow)
	if err != nil {
		t.Fatalf("IssueServing: %v", err)
	}
	if _, err := ParseCA(certPEM, keyPEM); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("ParseCA on a leaf: %v, want not-a-CA error", err)
	}
	cert := mustParseCert(t, certPEM)

	wantNames := []string{"isle-1.local", "localhost", "api.isle", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if !slices.Equal(cert.DNSNames, wantNames) {
		t.Errorf("DNSNames = %q, want %q", cert.DNSNames, wantNames)
	}
	var gotIPs []string
	for _, ip := range cert.IPAddresses {
		gotIPs = append(gotIPs, ip.String())
	}
	if want := []string{"192.168.1.10", "127.0.0.1", "fd00::10", "::1"}; !slices.Equal(gotIPs, want) {
		t.Errorf("IPAddresses = %q, want %q", gotIPs, want)
	}
	if want := testNow.Add(LeafValidity); !cert.NotAfter.Equal(want) {
		t.Errorf("NotAfter = %v, want %v", cert.NotAfter, want)
	}
	if cert.IsCA {
		t.Error("leaf is a CA")
	}

	for _, host := range append(wantNames, gotIPs...) {
		_, err := cert.Verify(x509.VerifyOptions{
			Roots: ca.Pool(), DNSName: host, CurrentTime: testNow,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("verify for %q: %v", host, err)
		}
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: testNow,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err == nil {
		t.Error("serving certificate verifies for client auth")
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: mustCA(t, "other").Pool(), CurrentTime: testNow,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err == nil {
		t.Error("serving certificate verifies against another CA")
	}
}

func TestIssueErrors(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	tests := []struct {
		name  string
		issue func() error
		want  string
	}{
		{"serving: empty CN", func() error {
			_, _, err := ca.IssueServing("", nil, nil, testNow)
			return err
		}, "empty common name"},
		{"serving: empty DNS name", func() error {
			_, _, err := ca.IssueServing("s", []string{""}, nil, testNow)
			return err
		}, `invalid DNS name ""`},
		{"serving: space in DNS name", func() error {
			_, _, err := ca.IssueServing("s", []string{"a b"}, nil, testNow)
			return err
		}, `invalid DNS name "a b"`},
		{"serving: non-ASCII DNS name", func() error {
			_, _, err := ca.IssueServing("s", []string{"bücher.example"}, nil, testNow)
			return err
		}, "invalid DNS name"},
		{"serving: empty label", func() error {
			_, _, err := ca.IssueServing("s", []string{"a..b"}, nil, testNow)
			return err
		}, "invalid DNS name"},
		{"serving: invalid IP", func() error {
			_, _, err := ca.IssueServing("s", nil, []net.IP{{1, 2, 3}}, testNow)
			return err
		}, "invalid IP address"},
		{"serving: CA expired", func() error {
			_, _, err := ca.IssueServing("s", nil, nil, testNow.Add(CAValidity+ClockSkew+time.Second))
			return err
		}, "is not valid at"},
		{"client: empty CN", func() error {
			_, _, err := ca.IssueClient("", []string{"g"}, testNow)
			return err
		}, "empty common name"},
		{"client: empty group", func() error {
			_, _, err := ca.IssueClient("u", []string{"g", ""}, testNow)
			return err
		}, "empty organization"},
		{"client: no CA key", func() error {
			_, _, err := newCA(&KeyPair{Cert: ca.Cert()}).IssueClient("u", nil, testNow)
			return err
		}, "CA certificate or key missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.issue()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pki: issue ") {
				t.Errorf("error %v, want one starting with %q and containing %q", err, "pki: issue ", tc.want)
			}
		})
	}
}

func TestIssueClampsToCAValidity(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	late := ca.Cert().NotAfter.Add(-24 * time.Hour)
	certPEM, _, err := ca.IssueClient("u", nil, late)
	if err != nil {
		t.Fatal(err)
	}
	cert := mustParseCert(t, certPEM)
	if !cert.NotAfter.Equal(ca.Cert().NotAfter) {
		t.Errorf("NotAfter = %v, want the CA's %v", cert.NotAfter, ca.Cert().NotAfter)
	}
	certPEM, _, err = ca.IssueClient("u", nil, ca.Cert().NotBefore)
	if err != nil {
		t.Fatal(err)
	}
	if cert := mustParseCert(t, certPEM); !cert.NotBefore.Equal(ca.Cert().NotBefore) {
		t.Errorf("NotBefore = %v, want the CA's %v", cert.NotBefore, ca.Cert().NotBefore)
	}
}

func TestIssueClient(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	certPEM, keyPEM := mustClient(t, ca, "isle-admin", "system:masters", "isle:admins")
	cert := mustParseCert(t, certPEM)
	if cert.Subject.CommonName != "isle-admin" {
		t.Errorf("CN = %q, want isle-admin", cert.Subject.CommonName)
	}
	// The organizations form one DER SET, so their order is not kept.
	if want := []string{"isle:admins", "system:masters"}; !slices.Equal(slices.Sorted(slices.Values(cert.Subject.Organization)), want) {
		t.Errorf("O = %q, want %q", cert.Subject.Organization, want)
	}
	if len(cert.DNSNames)+len(cert.IPAddresses) != 0 {
		t.Errorf("client certificate has SANs %q %v", cert.DNSNames, cert.IPAddresses)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: testNow,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify for client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: testNow,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verifies for server auth")
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("key does not match certificate")
	}
	if key.Equal(ca.Signer().Key) {
		t.Error("leaf reuses the CA key")
	}
}

func TestCAHash(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	spki, err := x509.MarshalPKIXPublicKey(ca.Signer().Key.Public())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := wire.CAHash(ca.Cert()); got != want {
		t.Errorf("CAHash = %q, want sha256 of SPKI %q", got, want)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(want) {
		t.Errorf("CAHash %q is not sha256:<64 hex>", want)
	}
	parsed, err := ParseCA(ca.CertPEM(), ca.Signer().KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := wire.CAHash(parsed.Cert()); got != want {
		t.Errorf("CAHash after ParseCA = %q, want %q", got, want)
	}
	if wire.CAHash(mustCA(t, "isle-ca").Cert()) == want {
		t.Error("two CAs have the same hash")
	}
}
