package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// Validity periods and the backdating applied to every NotBefore.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	ClockSkew    = time.Hour
)

// PEM block types written by this package.
const (
	pemCertificate  = "CERTIFICATE"
	pemECPrivateKey = "EC PRIVATE KEY"
	pemPKCS8Key     = "PRIVATE KEY"
	pemECParameters = "EC PARAMETERS"
)

// CA is the cluster's certificate authority as a server holds it: the CA
// that signs (its certificate and private key), and the CAs it trusts, the
// signing one first. They are one and the same but while the CA is
// replaced (Rotate): then both the old and the new are trusted, and either
// signs. Safe for concurrent use.
type CA struct {
	// LeafValidity is how long the certificates it issues are valid (0:
	// the constant LeafValidity). Tests of renewal shorten it; set it
	// before the CA issues anything.
	LeafValidity time.Duration

	mu      sync.RWMutex
	signer  *KeyPair
	trusted []*x509.Certificate // signer's first
}

// KeyPair is one CA's certificate and private key, parsed and in PEM
// form.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// newCA is a CA of one key pair, trusting it alone.
func newCA(kp *KeyPair) *CA {
	return &CA{signer: kp, trusted: []*x509.Certificate{kp.Cert}}
}

// Cert is the signing CA's certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.Signer().Cert }

// CertPEM is the signing CA's certificate in PEM.
func (ca *CA) CertPEM() []byte { return ca.Signer().CertPEM }

// Signer is the key pair that signs.
func (ca *CA) Signer() *KeyPair {
	ca.mu.RLock()
	defer ca.mu.RUnlock()
	return ca.signer
}

// Trusted are the CA certificates trusted, the signer's first.
func (ca *CA) Trusted() []*x509.Certificate {
	ca.mu.RLock()
	defer ca.mu.RUnlock()
	return slices.Clone(ca.trusted)
}

// BundlePEM is Trusted in PEM, one block after the other: what a board
// or a kubeconfig trusts.
func (ca *CA) BundlePEM() []byte {
	var out []byte
	for _, c := range ca.Trusted() {
		out = append(out, encodeCert(c.Raw)...)
	}
	return out
}

// Rotate makes signer sign from now on, and trusts its certificate and
// also (while a CA is replaced) the others: certificates issued before go
// on verifying as long as their CA is trusted.
func (ca *CA) Rotate(signer *KeyPair, also ...*x509.Certificate) {
	trusted := []*x509.Certificate{signer.Cert}
	for _, c := range also {
		if !slices.ContainsFunc(trusted, c.Equal) {
			trusted = append(trusted, c)
		}
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.signer, ca.trusted = signer, trusted
}

// IssuedBy is the trusted CA certificate that signed cert, nil if none.
func (ca *CA) IssuedBy(cert *x509.Certificate) *x509.Certificate {
	for _, c := range ca.Trusted() {
		if bytes.Equal(cert.RawIssuer, c.RawSubject) && cert.CheckSignatureFrom(c) == nil {
			return c
		}
	}
	return nil
}

// SignedByCurrent reports whether cert was signed by the signing CA (a
// certificate of the CA replaced is due for renewal at once).
func (ca *CA) SignedByCurrent(cert *x509.Certificate) bool {
	signer := ca.Cert()
	if len(cert.AuthorityKeyId) > 0 && len(signer.SubjectKeyId) > 0 {
		return bytes.Equal(cert.AuthorityKeyId, signer.SubjectKeyId)
	}
	return cert.CheckSignatureFrom(signer) == nil
}

// NewCA makes a self-signed ECDSA P-256 CA valid for CAValidity from now.
func NewCA(commonName string, now time.Time) (*CA, error) {
	kp, err := NewKeyPair(commonName, now)
	if err != nil {
		return nil, err
	}
	return newCA(kp), nil
}

// NewKeyPair makes the key pair of a self-signed ECDSA P-256 CA valid for
// CAValidity from now.
func NewKeyPair(commonName string, now time.Time) (*KeyPair, error) {
	if commonName == "" {
		return nil, errors.New("pki: new CA: empty common name")
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("pki: new CA: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("pki: new CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-ClockSkew).UTC(),
		NotAfter:              now.Add(CAValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: new CA: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: new CA: parse created certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: new CA: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ParseCA parses a CA certificate and its private key from PEM. The key may
// be SEC 1 ("EC PRIVATE KEY", optionally after an "EC PARAMETERS" block) or
// PKCS #8 ("PRIVATE KEY"). It checks that the certificate is a CA allowed to
// sign certificates and that the key is its P-256 key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	kp, err := ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return newCA(kp), nil
}

// ParseKeyPair is ParseCA's key pair.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, err := wire.ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("pki: parse CA: certificate %q is not a CA (basic constraints CA:TRUE missing)", cert.Subject.CommonName)
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("pki: parse CA: certificate %q lacks the certificate-signing key usage", cert.Subject.CommonName)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("pki: parse CA: private key does not match certificate %q", cert.Subject.CommonName)
	}
	canonKey, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: encodeCert(cert.Raw), KeyPEM: canonKey}, nil
}

// Pool returns a new certificate pool of the trusted CA certificates.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range ca.Trusted() {
		p.AddCert(c)
	}
	return p
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate P-256 key: %w", err)
	}
	return key, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemECPrivateKey, Bytes: der}), nil
}

// parseKeyPEM parses an ECDSA P-256 private key, skipping a leading
// "EC PARAMETERS" block as written by openssl ecparam -genkey.
func parseKeyPEM(data []byte) (*ecdsa.PrivateKey, error) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("private key: no PEM block found")
		}
		var (
			parsed any
			err    error
		)
		switch block.Type {
		case pemECParameters:
			continue
		case pemECPrivateKey:
			parsed, err = x509.ParseECPrivateKey(block.Bytes)
		case pemPKCS8Key:
			parsed, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			return nil, fmt.Errorf("private key: PEM block is %q, want %q or %q", block.Type, pemECPrivateKey, pemPKCS8Key)
		}
		if err != nil {
			return nil, fmt.Errorf("private key: %w", err)
		}
		key, ok := parsed.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key: %T is not an ECDSA key", parsed)
		}
		if key.Curve != elliptic.P256() {
			return nil, fmt.Errorf("private key: curve %s, want P-256", key.Curve.Params().Name)
		}
		return key, nil
	}
}
