package pki

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// InfoCAKey is the HKDF info string for sealing the CA private key.
const InfoCAKey = "isle ca key v1"

// Sealed blob layout; see the package documentation.
const (
	sealVersion   byte = 1
	sealSaltLen        = 16
	sealNonceLen       = 12
	sealKeyLen         = 32 // AES-256
	sealTagLen         = 16
	sealHeaderLen      = 1 + sealSaltLen
	sealMinLen         = sealHeaderLen + sealNonceLen + sealTagLen
)

var (
	// ErrDecrypt means a sealed blob failed authentication: wrong secret,
	// wrong info, or altered data.
	ErrDecrypt = errors.New("pki: decrypt: authentication failed (wrong secret or corrupted data)")
	// ErrSealedFormat means the input is not a sealed blob of a known version.
	ErrSealedFormat = errors.New("pki: not a sealed blob")
)

// Seal encrypts plaintext with AES-256-GCM under a key derived from secret
// and info by HKDF-SHA256 with a fresh random salt.
func Seal(plaintext []byte, secret string, info string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("pki: seal: empty secret")
	}
	out := make([]byte, sealHeaderLen+sealNonceLen, sealMinLen+len(plaintext))
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil { // salt and nonce
		return nil, fmt.Errorf("pki: seal: %w", err)
	}
	aead, err := sealAEAD(secret, out[1:sealHeaderLen], info)
	if err != nil {
		return nil, fmt.Errorf("pki: seal: %w", err)
	}
	nonce := out[sealHeaderLen : sealHeaderLen+sealNonceLen]
	return aead.Seal(out, nonce, plaintext, out[:sealHeaderLen]), nil
}

// Open decrypts a blob made by Seal with the same secret and info. It
// returns ErrDecrypt if authentication fails and an error wrapping
// ErrSealedFormat if the blob is too short or of an unknown version.
func Open(sealed []byte, secret string, info string) ([]byte, error) {
	if len(sealed) < sealMinLen {
		return nil, fmt.Errorf("pki: open: %w: %d bytes, need at least %d", ErrSealedFormat, len(sealed), sealMinLen)
	}
	if sealed[0] != sealVersion {
		return nil, fmt.Errorf("pki: open: %w: unknown version %d, want %d", ErrSealedFormat, sealed[0], sealVersion)
	}
	if secret == "" {
		return nil, errors.New("pki: open: empty secret")
	}
	aead, err := sealAEAD(secret, sealed[1:sealHeaderLen], info)
	if err != nil {
		return nil, fmt.Errorf("pki: open: %w", err)
	}
	nonce := sealed[sealHeaderLen : sealHeaderLen+sealNonceLen]
	plain, err := aead.Open(nil, nonce, sealed[sealHeaderLen+sealNonceLen:], sealed[:sealHeaderLen])
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}

func sealAEAD(secret string, salt []byte, info string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, []byte(secret), salt, info, sealKeyLen)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("AES: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("GCM: %w", err)
	}
	return aead, nil
}
