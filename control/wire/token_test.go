package wire_test

import (
	"bytes"
	"reflect"
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
		if !reflect.DeepEqual(got, tok) {
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

func TestAgentTokenRoundTrip(t *testing.T) {
	ca := newCA(t)
	key := bytes.Repeat([]byte{0xa5}, 32)
	_, bearer, err := pki.NewBearerToken()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.AgentToken(wire.CAHash(ca.Cert()), bearer, key)
	if err != nil {
		t.Fatalf("AgentToken: %v", err)
	}
	if !tok.IsAgent() || tok.Bearer() != bearer {
		t.Fatalf("IsAgent %v, Bearer %q, want true and %q", tok.IsAgent(), tok.Bearer(), bearer)
	}
	s := tok.String()
	if want := `^ISLE1::[0-9a-f]{64}::[a-z0-9]{6}\.[a-z0-9]{32}::[a-z2-7]{52}$`; !regexp.MustCompile(want).MatchString(s) {
		t.Errorf("String() = %q, want match for %s", s, want)
	}
	got, err := wire.ParseToken(s)
	if err != nil || !reflect.DeepEqual(got, tok) {
		t.Fatalf("ParseToken(%q) = %+v, %v; want %+v", s, got, err, tok)
	}
	// A server token is not an agent token, and its Bearer is its secret;
	// a replaced one carries the gossip key.
	srv, err := wire.NewToken(ca.Cert())
	if err != nil || srv.IsAgent() || srv.Bearer() != srv.Secret {
		t.Errorf("server token: IsAgent %v, Bearer %q, err %v", srv.IsAgent(), srv.Bearer(), err)
	}
	srv.GossipKey = key
	if got, err := wire.ParseToken(srv.String()); err != nil || got.IsAgent() || !reflect.DeepEqual(got, srv) {
		t.Errorf("a server token with the gossip key: %q parsed as %+v, %v", srv.String(), got, err)
	}
	for _, bad := range []struct {
		bearer string
		key    []byte
	}{{"nodot", key}, {bearer, key[:31]}, {"ABCDEF." + strings.Repeat("a", 16), key}} {
		if _, err := wire.AgentToken(tok.CAHash, bad.bearer, bad.key); err == nil {
			t.Errorf("AgentToken(%q, %d-byte key) succeeded", bad.bearer, len(bad.key))
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	secret := strings.Repeat("a2", 16)
	agentSecret := strings.Repeat("x9", 16)
	gossipKey := strings.Repeat("k", 52)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "got 1 part(s)"},
		{"two parts", "ISLE1::" + hash, "got 2 part(s)"},
		{"five parts", "ISLE1::" + hash + "::" + secret + "::x::y", "got 5 part(s)"},
		{"agent token without id", "ISLE1::" + hash + "::" + agentSecret + "::" + gossipKey, "secret is not base32"},
		{"server token with a short key", "ISLE1::" + hash + "::" + secret + "::" + gossipKey[:50], "gossip key has 50 characters, want 52"},
		{"agent token with a short id", "ISLE1::" + hash + "::abc." + agentSecret + "::" + gossipKey, `ID is 6 of a-z and 0-9, not "abc"`},
		{"agent token with a short secret", "ISLE1::" + hash + "::abc123.abc::" + gossipKey, "secret has 16 to 64 characters of a-z and 0-9; this one has 3"},
		{"agent token with a symbol", "ISLE1::" + hash + "::abc123." + agentSecret[:15] + "_::" + gossipKey, "secret has 16 to 64"},
		{"agent token with a short key", "ISLE1::" + hash + "::abc123." + agentSecret + "::" + gossipKey[:51], "gossip key has 51 characters, want 52"},
		{"agent token with a key not base32", "ISLE1::" + hash + "::abc123." + agentSecret + "::" + gossipKey[:51] + "1", "gossip key is not base32"},
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

// FuzzParseToken feeds ParseToken what a board's config file may hold:
// nothing panics, and a token it takes prints as text that parses to the
// same token.
func FuzzParseToken(f *testing.F) {
	hash := strings.Repeat("ab", 32)
	for _, seed := range []string{
		"ISLE1::" + hash + "::" + strings.Repeat("a2", 16),
		"ISLE1::" + hash + "::" + strings.Repeat("a2", 16) + "::" + strings.Repeat("k", 52),
		"ISLE1::" + hash + "::abc123." + strings.Repeat("x9", 16) + "::" + strings.Repeat("k", 52),
		"ISLE1::" + hash + "::abc123.x::y",
		"K10" + hash + "::server:secret",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := wire.ParseToken(s)
		if err != nil {
			return
		}
		again, err := wire.ParseToken(tok.String())
		if err != nil || !reflect.DeepEqual(again, tok) {
			t.Fatalf("%q parsed as %+v, printed %q, parsed again as %+v, %v", s, tok, tok.String(), again, err)
		}
	})
}
