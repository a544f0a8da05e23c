package wire

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Join token text form: tokenPrefix, then the CA hash in hex, then the
// secret, separated by tokenSep. See the package documentation.
const (
	tokenPrefix      = "ISLE1"
	tokenSep         = "::"
	tokenSecretBytes = 20 // 160 bits
	tokenSecretLen   = 32 // base32 characters for tokenSecretBytes
	tokenHashHexLen  = 64 // hex characters of a SHA-256
)

// secretEncoding is RFC 4648 base32 in lower case without padding.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Token is a join token: the hash of the CA a joiner must pin and a secret
// proving it was invited (also the key material for Seal of the CA key).
type Token struct {
	// CAHash is "sha256:<64 lowercase hex>", as returned by CAHash.
	CAHash string
	// Secret is 32 lowercase base32 characters (160 bits).
	Secret string
}

// NewToken returns a token pinning the CA certificate caCert with a fresh
// random secret.
func NewToken(caCert *x509.Certificate) (Token, error) {
	if caCert == nil {
		return Token{}, errors.New("wire: new token: no CA certificate")
	}
	var b [tokenSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Token{}, fmt.Errorf("wire: new token: %w", err)
	}
	return Token{CAHash: CAHash(caCert), Secret: secretEncoding.EncodeToString(b[:])}, nil
}

// ParseToken parses the text form of a join token. Surrounding blanks are
// ignored and the hash and secret may be in either case; the result is in
// lower case.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(strings.TrimSpace(s), tokenSep)
	if len(parts) != 3 {
		return Token{}, fmt.Errorf("wire: parse token: want %s%s<CA hash>%s<secret>, got %d part(s) separated by %q",
			tokenPrefix, tokenSep, tokenSep, len(parts), tokenSep)
	}
	if parts[0] != tokenPrefix {
		return Token{}, fmt.Errorf("wire: parse token: unknown prefix %q, want %q", parts[0], tokenPrefix)
	}
	hash := strings.ToLower(parts[1])
	if len(hash) != tokenHashHexLen {
		return Token{}, fmt.Errorf("wire: parse token: CA hash has %d characters, want %d hex digits", len(hash), tokenHashHexLen)
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return Token{}, fmt.Errorf("wire: parse token: CA hash is not hex: %w", err)
	}
	secret := strings.ToLower(parts[2])
	if len(secret) != tokenSecretLen {
		return Token{}, fmt.Errorf("wire: parse token: secret has %d characters, want %d", len(secret), tokenSecretLen)
	}
	if _, err := secretEncoding.DecodeString(secret); err != nil {
		return Token{}, fmt.Errorf("wire: parse token: secret is not base32 (a-z, 2-7): %w", err)
	}
	return Token{CAHash: hashPrefix + hash, Secret: secret}, nil
}

// String returns the text form ParseToken reads.
func (t Token) String() string {
	return tokenPrefix + tokenSep + strings.TrimPrefix(t.CAHash, hashPrefix) + tokenSep + t.Secret
}

// CAHash returns "sha256:<hex>" of the certificate's SubjectPublicKeyInfo,
// the format of kubeadm's --discovery-token-ca-cert-hash.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hashPrefix + hex.EncodeToString(sum[:])
}

const hashPrefix = "sha256:"
