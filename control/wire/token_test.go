package wire_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
)

func TestTokenRoundTrip(t *testing.T) {
	ca := newCA(t)
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatalf("NewToken: %v", err)
	}
	if tok.CAHash != wire.CAHash(ca.Cert()) {
		t.Errorf("CAHash = %q, want %q", tok.CAHash, wire.CAHash(ca.Cert()))
	}
	if !regexp.MustCompile(`^[a-z2-7]{32}$`).MatchString(tok.Secret) {
		t.Errorf("secret %q is not 32 lowercase base32 characters", tok.Secret)
	}
	s := tok.String()
	if want := `^ISLE1::[0-9a-f]{64}::[a-z2-7]{32}$`; !regexp.MustCompile(want).MatchString(s) {
		t.Errorf("String() = %q, want match for %s", s, want)
	}
	for _, in := range []string{s, "  " + s + "\n", "ISLE1::" + strings.ToUpper(strings.TrimPrefix(s, "ISLE1::"))} {
		got, err := wire.ParseToken(in)
		if err != nil {
			t.Fatalf("wire.ParseToken(%q): %v", in, err)
		}
		if got != tok {
			t.Errorf("wire.ParseToken(%q) = %+v, want %+v", in, got, tok)
		}
	}
	tok2, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	if tok2.Secret == tok.Secret {
		t.Error("two tokens have the same secret")
	}
}

func TestParseTokenRejects(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	secret := strings.Repeat("a2", 16)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "got 1 part(s)"},
		{"two parts", "ISLE1::" + hash, "got 2 part(s)"},
		{"four parts", "ISLE1::" + hash + "::" + secret + "::x", "got 4 part(s)"},
		{"single colons", "ISLE1:" + hash + ":" + secret, "got 1 part(s)"},
		{"wrong prefix", "ISLE2::" + hash + "::" + secret, `unknown prefix "ISLE2"`},
		{"lowercase prefix", "isle1::" + hash + "::" + secret, `unknown prefix "isle1"`},
		{"kubeadm hash prefix", "ISLE1::sha256:" + hash + "::" + secret, "CA hash has 71 characters"},
		{"short hash", "ISLE1::" + hash[:62] + "::" + secret, "CA hash has 62 characters"},
		{"long hash", "ISLE1::" + hash + "00::" + secret, "CA hash has 66 characters"},
		{"non-hex hash", "ISLE1::" + hash[:63] + "g::" + secret, "CA hash is not hex"},
		{"empty secret", "ISLE1::" + hash + "::", "secret has 0 characters"},
		{"short secret", "ISLE1::" + hash + "::" + secret[:31], "secret has 31 characters"},
		{"long secret", "ISLE1::" + hash + "::" + secret + "a", "secret has 33 characters"},
		{"secret with digit 1", "ISLE1::" + hash + "::" + secret[:31] + "1", "secret is not base32"},
		{"secret with padding", "ISLE1::" + hash + "::" + secret[:31] + "=", "secret is not base32"},
		{"inner blank", "ISLE1:: " + hash[1:] + "::" + secret, "CA hash is not hex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := wire.ParseToken(tc.in)
			if err == nil {
				t.Fatalf("wire.ParseToken(%q) = %+v, want error", tc.in, tok)
			}
			if !strings.HasPrefix(err.Error(), "wire: parse token: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
	// The valid base of the table parses, so each case fails for its own reason.
	if _, err := wire.ParseToken("ISLE1::" + hash + "::" + secret); err != nil {
		t.Errorf("valid token: %v", err)
	}
}

// newCA is a cluster CA, made by the control plane's package.
func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("isle-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
