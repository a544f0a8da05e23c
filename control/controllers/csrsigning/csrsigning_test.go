package csrsigning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func request(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestIssue: what the kube-apiserver-client signer refuses, and the
// validity it asks of the CA.
func TestIssue(t *testing.T) {
	var asked time.Duration
	c := &Controller{sign: func(_ *x509.CertificateRequest, validity time.Duration, _ time.Time) ([]byte, error) {
		asked = validity
		return []byte("cert"), nil
	}}
	plain := request(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "u"}})
	withDNS := request(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "u"}, DNSNames: []string{"x.example"}})
	hour := int32(3600)
	for _, tc := range []struct {
		name   string
		spec   certificatesv1.CertificateSigningRequestSpec
		err    string
		wanted time.Duration
	}{
		{"client auth", certificatesv1.CertificateSigningRequestSpec{Request: plain, Usages: []certificatesv1.KeyUsage{"client auth", "digital signature"}}, "", maxValidity},
		{"an hour", certificatesv1.CertificateSigningRequestSpec{Request: plain, Usages: []certificatesv1.KeyUsage{"client auth"}, ExpirationSeconds: &hour}, "", time.Hour},
		{"server auth", certificatesv1.CertificateSigningRequestSpec{Request: plain, Usages: []certificatesv1.KeyUsage{"client auth", "server auth"}}, `usage "server auth" is not allowed`, 0},
		{"no client auth", certificatesv1.CertificateSigningRequestSpec{Request: plain, Usages: []certificatesv1.KeyUsage{"digital signature"}}, "must include client auth", 0},
		{"a DNS name", certificatesv1.CertificateSigningRequestSpec{Request: withDNS, Usages: []certificatesv1.KeyUsage{"client auth"}}, "no DNS names", 0},
	} {
		asked = 0
		_, err := c.issue(&certificatesv1.CertificateSigningRequest{Spec: tc.spec}, time.Now())
		switch {
		case tc.err == "" && (err != nil || asked != tc.wanted):
			t.Errorf("%s: %v, validity %v", tc.name, err, asked)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	csr := func(created time.Duration, conds ...certificatesv1.CertificateSigningRequestCondition) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(created)},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: conds}}
	}
	approved := func(ago time.Duration) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, LastUpdateTime: at(ago)}
	}
	for name, tc := range map[string]struct {
		c    *certificatesv1.CertificateSigningRequest
		want bool
	}{
		"pending a while":      {csr(2 * time.Hour), false},
		"pending over a day":   {csr(25 * time.Hour), true},
		"approved just now":    {csr(3*time.Hour, approved(time.Minute)), false},
		"approved an hour ago": {csr(3*time.Hour, approved(61*time.Minute)), true},
	} {
		if got := expired(tc.c, now); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
