package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Names every serving certificate carries, so that clients reach the API
// server by loopback and by its in-cluster service name.
var (
	defaultDNSNames = []string{
		"localhost",
		"kubernetes",
		"kubernetes.default",
		"kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}
	defaultIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// IssueServing issues a serving certificate (ExtKeyUsageServerAuth) valid for
// the CA's LeafValidity, with a fresh P-256 key. Besides dnsNames and ips it always
// names localhost, 127.0.0.1, ::1 and the kubernetes.default.svc names.
func (ca *CA) IssueServing(commonName string, dnsNames []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("pki: issue serving certificate: empty common name")
	}
	names := make([]string, 0, len(dnsNames)+len(defaultDNSNames))
	for _, n := range append(slices.Clone(dnsNames), defaultDNSNames...) {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if err := checkDNSName(n); err != nil {
			return nil, nil, fmt.Errorf("pki: issue serving certificate: %w", err)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	addrs := make([]net.IP, 0, len(ips)+len(defaultIPs))
	for _, ip := range append(slices.Clone(ips), defaultIPs...) {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return nil, nil, fmt.Errorf("pki: issue serving certificate: invalid IP address %v", ip)
		}
		if !slices.ContainsFunc(addrs, ip.Equal) {
			addrs = append(addrs, ip)
		}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    names,
		IPAddresses: addrs,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, keyPEM, err = ca.issue(tmpl, now)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue serving certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// IssueClient issues a client certificate (ExtKeyUsageClientAuth) valid for
// the CA's LeafValidity, with a fresh P-256 key. As in Kubernetes, the common name is
// the user name and orgs are its groups.
func (ca *CA) IssueClient(commonName string, orgs []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	return ca.IssueClientFor(commonName, orgs, now, 0)
}

// IssueClientFor is IssueClient with a validity of its own (0: the CA's
// LeafValidity), within the CA's.
func (ca *CA) IssueClientFor(commonName string, orgs []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("pki: issue client certificate: empty common name (user name)")
	}
	if slices.Contains(orgs, "") {
		return nil, nil, errors.New("pki: issue client certificate: empty organization (group)")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: slices.Clone(orgs)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if validity > 0 {
		tmpl.NotAfter = now.Add(validity)
	}
	certPEM, keyPEM, err = ca.issue(tmpl, now)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue client certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// issue generates a key and signs tmpl for it (see sign).
func (ca *CA) issue(tmpl *x509.Certificate, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = ca.sign(tmpl, key.Public(), now)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// sign completes tmpl (serial, validity within the CA's, key usage) and
// signs the certificate of pub with the CA. A NotAfter already in tmpl
// stands for the CA's LeafValidity.
func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, now time.Time) (certPEM []byte, err error) {
	if ca == nil {
		return nil, errors.New("no CA")
	}
	kp := ca.Signer()
	if kp == nil || kp.Cert == nil || kp.Key == nil {
		return nil, errors.New("CA certificate or key missing")
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	validity := ca.LeafValidity
	if validity <= 0 {
		validity = LeafValidity
	}
	// The backdating is a tenth of a short validity at most, so that its
	// renewal (at three fifths of NotBefore to NotAfter) still comes before
	// it expires.
	tmpl.SerialNumber = serial
	tmpl.NotBefore = maxTime(now.Add(-min(ClockSkew, validity/10)), kp.Cert.NotBefore).UTC()
	notAfter := now.Add(validity)
	if !tmpl.NotAfter.IsZero() {
		notAfter = tmpl.NotAfter
	}
	tmpl.NotAfter = minTime(notAfter, kp.Cert.NotAfter).UTC()
	if !tmpl.NotAfter.After(tmpl.NotBefore) {
		return nil, fmt.Errorf("CA %q is not valid at %s (valid %s to %s)",
			kp.Cert.Subject.CommonName, now.UTC().Format(time.RFC3339),
			kp.Cert.NotBefore.Format(time.RFC3339), kp.Cert.NotAfter.Format(time.RFC3339))
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, kp.Cert, pub, kp.Key)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	return encodeCert(der), nil
}

// checkDNSName rejects names that cannot be a DNS SAN: empty, too long, or
// with characters outside letters, digits, '-', '.' and a leading "*.".
func checkDNSName(n string) error {
	if n == "" || len(n) > 253 {
		return fmt.Errorf("invalid DNS name %q", n)
	}
	labels := strings.Split(strings.TrimPrefix(n, "*."), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return fmt.Errorf("invalid DNS name %q", n)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("invalid DNS name %q: character %q", n, c)
			}
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// SignClientRequest signs a client certificate for a certificate request
// (a CertificateSigningRequest's): its subject (CommonName = user,
// Organization = groups) and public key, valid for validity within the
// CA's.
func (ca *CA) SignClientRequest(req *x509.CertificateRequest, validity time.Duration, now time.Time) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("pki: sign client certificate: the request's signature: %w", err)
	}
	if req.Subject.CommonName == "" {
		return nil, errors.New("pki: sign client certificate: empty common name (user name)")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: req.Subject.CommonName, Organization: slices.Clone(req.Subject.Organization)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    now.Add(validity),
	}
	certPEM, err := ca.sign(tmpl, req.PublicKey, now)
	if err != nil {
		return nil, fmt.Errorf("pki: sign client certificate: %w", err)
	}
	return certPEM, nil
}
