package pki

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/control/wire"
)

const testSecret = "abcdefghijklmnopqrstuvwxyz234567"

func TestSealOpenRoundTrip(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{"CA key", ca.Signer().KeyPEM},
		{"empty", []byte{}},
		{"one byte", []byte{0}},
		{"large", bytes.Repeat([]byte("isle"), 1<<14)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sealed, err := Seal(tc.plaintext, testSecret, InfoCAKey)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if want := sealMinLen + len(tc.plaintext); len(sealed) != want {
				t.Errorf("sealed length %d, want %d", len(sealed), want)
			}
			if sealed[0] != 1 {
				t.Errorf("version byte %d, want 1", sealed[0])
			}
			if len(tc.plaintext) >= 8 && bytes.Contains(sealed, tc.plaintext[:8]) {
				t.Error("sealed blob contains plaintext")
			}
			got, err := Open(sealed, testSecret, InfoCAKey)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tc.plaintext) {
				t.Errorf("Open = %q, want %q", got, tc.plaintext)
			}
		})
	}
}

func TestSealIsRandomized(t *testing.T) {
	a, err := Seal([]byte("same"), testSecret, InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal([]byte("same"), testSecret, InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[1:sealHeaderLen], b[1:sealHeaderLen]) {
		t.Error("two seals share a salt")
	}
	if bytes.Equal(a[sealHeaderLen:], b[sealHeaderLen:]) {
		t.Error("two seals share nonce and ciphertext")
	}
}

func TestOpenRejects(t *testing.T) {
	plaintext := []byte("-----BEGIN EC PRIVATE KEY-----")
	sealed, err := Seal(plaintext, testSecret, InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name   string
		sealed []byte
		secret string
		info   string
		want   error // ErrDecrypt or ErrSealedFormat
	}{
		{"wrong secret", sealed, "bbcdefghijklmnopqrstuvwxyz234567", InfoCAKey, ErrDecrypt},
		{"wrong info", sealed, testSecret, "isle ca key v2", ErrDecrypt},
		{"tampered version", flip(0), testSecret, InfoCAKey, ErrSealedFormat},
		{"tampered salt", flip(1), testSecret, InfoCAKey, ErrDecrypt},
		{"tampered nonce", flip(sealHeaderLen), testSecret, InfoCAKey, ErrDecrypt},
		{"tampered ciphertext", flip(sealHeaderLen + sealNonceLen), testSecret, InfoCAKey, ErrDecrypt},
		{"tampered tag", flip(len(sealed) - 1), testSecret, InfoCAKey, ErrDecrypt},
		{"appended byte", append(bytes.Clone(sealed), 0), testSecret, InfoCAKey, ErrDecrypt},
		{"truncated by one byte", sealed[:len(sealed)-1], testSecret, InfoCAKey, ErrDecrypt},
		{"truncated to the minimum", sealed[:sealMinLen], testSecret, InfoCAKey, ErrDecrypt},
		{"truncated below the minimum", sealed[:sealMinLen-1], testSecret, InfoCAKey, ErrSealedFormat},
		{"header only", sealed[:sealHeaderLen], testSecret, InfoCAKey, ErrSealedFormat},
		{"empty", nil, testSecret, InfoCAKey, ErrSealedFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Open(tc.sealed, tc.secret, tc.info)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %q, %v; want error %v", got, err, tc.want)
			}
			if got != nil {
				t.Errorf("Open returned plaintext %q with an error", got)
			}
		})
	}
	// The untouched blob opens, so each case fails for its own reason.
	if _, err := Open(sealed, testSecret, InfoCAKey); err != nil {
		t.Errorf("Open(original): %v", err)
	}
}

func TestSealOpenEmptySecret(t *testing.T) {
	if _, err := Seal([]byte("x"), "", InfoCAKey); err == nil || !strings.Contains(err.Error(), "empty secret") {
		t.Errorf("Seal with empty secret: %v, want empty-secret error", err)
	}
	sealed, err := Seal([]byte("x"), testSecret, InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(sealed, "", InfoCAKey); err == nil || !strings.Contains(err.Error(), "empty secret") {
		t.Errorf("Open with empty secret: %v, want empty-secret error", err)
	}
}

func TestSealWithTokenSecret(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := Seal(ca.Signer().KeyPEM, tok.Secret, InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	// A joiner parses the token text (here retyped in capitals) and opens
	// the CA key with it.
	parsed, err := wire.ParseToken(strings.ToUpper(tok.String()))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := Open(sealed, parsed.Secret, InfoCAKey)
	if err != nil {
		t.Fatalf("Open with the parsed token's secret: %v", err)
	}
	if _, err := ParseCA(ca.CertPEM(), keyPEM); err != nil {
		t.Errorf("ParseCA with the opened key: %v", err)
	}
}
