package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// Bearer token shape: "<id>.<secret>", both drawn from bearerAlphabet.
const (
	bearerIDLen        = 6
	bearerSecretLen    = 32 // ~165 bits
	bearerMinSecretLen = 16 // accepted by SplitBearer, as kubeadm's bootstrap tokens
	bearerMaxSecretLen = 64
	bearerAlphabet     = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// NewBearerToken returns a random node bearer token and its id. Store
// HashBearer(token) under id; never the token itself.
func NewBearerToken() (id, token string, err error) {
	id, err = randomString(bearerIDLen)
	if err != nil {
		return "", "", fmt.Errorf("pki: new bearer token: %w", err)
	}
	secret, err := randomString(bearerSecretLen)
	if err != nil {
		return "", "", fmt.Errorf("pki: new bearer token: %w", err)
	}
	return id, id + "." + secret, nil
}

// HashBearer returns the lowercase hex SHA-256 of the whole token.
func HashBearer(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// BearerMatches reports, in constant time, whether token hashes to the
// stored hash.
func BearerMatches(token, storedHash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashBearer(token)), []byte(storedHash)) == 1
}

// SplitBearer splits a token into id and secret, reporting whether it has
// the bearer token shape (id of 6 and secret of 16 to 64 characters of
// [a-z0-9]). It does not check the secret against anything.
func SplitBearer(token string) (id, secret string, ok bool) {
	id, secret, found := strings.Cut(token, ".")
	if !found || len(id) != bearerIDLen || len(secret) < bearerMinSecretLen || len(secret) > bearerMaxSecretLen {
		return "", "", false
	}
	if !inAlphabet(id) || !inAlphabet(secret) {
		return "", "", false
	}
	return id, secret, true
}

func inAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(bearerAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// randomString returns n characters drawn uniformly from bearerAlphabet.
func randomString(n int) (string, error) {
	// Rejection sampling: bytes >= 252 (7*36) would bias the result.
	const limit = 256 - 256%len(bearerAlphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, bearerAlphabet[int(b)%len(bearerAlphabet)])
			}
		}
	}
	return string(out), nil
}
