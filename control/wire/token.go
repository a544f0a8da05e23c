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
	"time"
)

// Join token text form: tokenPrefix, then the CA hash in hex, then the
// secret, separated by tokenSep; an agent token has a fourth part, the
// gossip key, and its secret is <ID>.<secret>. See the package
// documentation.
const (
	tokenPrefix      = "ISLE1"
	tokenSep         = "::"
	tokenSecretBytes = 20 // 160 bits
	tokenSecretLen   = 32 // base32 characters for tokenSecretBytes
	tokenHashHexLen  = 64 // hex characters of a SHA-256

	// An agent token's ID and secret have the shape of a node's bearer
	// token (control/pki): [a-z0-9], 6 and 16 to 64 characters.
	agentIDLen        = 6
	agentMinSecretLen = 16
	agentMaxSecretLen = 64
	gossipKeyBytes    = 32
	gossipKeyLen      = 52 // base32 characters for gossipKeyBytes
	agentAlphabet     = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// secretEncoding is RFC 4648 base32 in lower case without padding.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Token is a join token: the hash of the CA a joiner must pin and a secret
// proving it was invited.
//
// A server token (ISLE1::<hash>::<secret>) admits servers and agents; its
// secret is also the key material for Seal of the CA key, and servers
// alone keep it. A replaced one (isle token rotate --server) carries the
// gossip key as a fourth part: its secret no longer derives it. An agent token (ISLE1::<hash>::<id>.<secret>::<gossip
// key>) admits agents alone: the servers keep only its hash, under its
// ID, and it carries the gossip key through which the joiner finds the
// servers (what every agent holds anyway once joined).
type Token struct {
	// CAHash is "sha256:<64 lowercase hex>", as returned by CAHash.
	CAHash string
	// Secret is 32 lowercase base32 characters (160 bits) in a server
	// token, 16 to 64 of [a-z0-9] in an agent token.
	Secret string
	// ID is an agent token's ([a-z0-9]{6}). GossipKey is the gossip key
	// an agent token or a replaced server token carries.
	ID        string
	GossipKey []byte
}

// IsAgent reports whether t is an agent token.
func (t Token) IsAgent() bool { return t.ID != "" }

// Bearer is what a joiner sends to prove it holds t: the secret of a
// server token, <ID>.<secret> of an agent token.
func (t Token) Bearer() string {
	if t.IsAgent() {
		return t.ID + "." + t.Secret
	}
	return t.Secret
}

// AgentToken returns the agent token of the cluster of CA hash caHash
// whose bearer part is bearer (<id>.<secret>, as pki.NewBearerToken makes
// it), carrying the gossip key.
func AgentToken(caHash, bearer string, gossipKey []byte) (Token, error) {
	id, secret, ok := SplitAgentBearer(bearer)
	switch {
	case !ok:
		return Token{}, errors.New("wire: agent token: the bearer part is not <id>.<secret>")
	case len(gossipKey) != gossipKeyBytes:
		return Token{}, fmt.Errorf("wire: agent token: gossip key of %d bytes, want %d", len(gossipKey), gossipKeyBytes)
	}
	return Token{CAHash: caHash, ID: id, Secret: secret, GossipKey: append([]byte(nil), gossipKey...)}, nil
}

// SplitAgentBearer splits what a joiner sent as an agent token's
// Bearer into its ID and secret.
func SplitAgentBearer(bearer string) (id, secret string, ok bool) {
	id, secret, ok = strings.Cut(bearer, ".")
	if !ok || !ValidAgentTokenID(id) || !isAgentSecret(secret) {
		return "", "", false
	}
	return id, secret, true
}

// ValidAgentTokenID reports whether id is an agent token's ID.
func ValidAgentTokenID(id string) bool { return len(id) == agentIDLen && inAgentAlphabet(id) }

func isAgentSecret(s string) bool {
	return len(s) >= agentMinSecretLen && len(s) <= agentMaxSecretLen && inAgentAlphabet(s)
}

func inAgentAlphabet(s string) bool {
	for i := range len(s) {
		if !strings.ContainsRune(agentAlphabet, rune(s[i])) {
			return false
		}
	}
	return true
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
	if len(parts) != 3 && len(parts) != 4 {
		return Token{}, fmt.Errorf("wire: parse token: want %s%s<CA hash>%s<secret> (a server token) or %s%s<CA hash>%s<id>.<secret>%s<gossip key> (an agent token), got %d part(s) separated by %q",
			tokenPrefix, tokenSep, tokenSep, tokenPrefix, tokenSep, tokenSep, tokenSep, len(parts), tokenSep)
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
	if len(parts) == 4 && strings.Contains(parts[2], ".") {
		return parseAgentToken(hashPrefix+hash, strings.ToLower(parts[2]), strings.ToLower(parts[3]))
	}
	secret := strings.ToLower(parts[2])
	if len(secret) != tokenSecretLen {
		return Token{}, fmt.Errorf("wire: parse token: secret has %d characters, want %d", len(secret), tokenSecretLen)
	}
	if _, err := secretEncoding.DecodeString(secret); err != nil {
		return Token{}, fmt.Errorf("wire: parse token: secret is not base32 (a-z, 2-7): %w", err)
	}
	tok := Token{CAHash: hashPrefix + hash, Secret: secret}
	if len(parts) == 4 {
		// A replaced server token: its secret no longer derives the
		// gossip key, which it carries.
		k, err := parseGossipKey(strings.ToLower(parts[3]))
		if err != nil {
			return Token{}, err
		}
		tok.GossipKey = k
	}
	return tok, nil
}

func parseGossipKey(key string) ([]byte, error) {
	if len(key) != gossipKeyLen {
		return nil, fmt.Errorf("wire: parse token: gossip key has %d characters, want %d", len(key), gossipKeyLen)
	}
	k, err := secretEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("wire: parse token: gossip key is not base32 (a-z, 2-7): %w", err)
	}
	return k, nil
}

func parseAgentToken(caHash, secret, key string) (Token, error) {
	id, sec, _ := strings.Cut(secret, ".")
	switch {
	case !ValidAgentTokenID(id):
		return Token{}, fmt.Errorf("wire: parse token: an agent token's ID is %d of a-z and 0-9, not %q", agentIDLen, id)
	case !isAgentSecret(sec):
		return Token{}, fmt.Errorf("wire: parse token: an agent token's secret has %d to %d characters of a-z and 0-9; this one has %d", agentMinSecretLen, agentMaxSecretLen, len(sec))
	}
	k, err := parseGossipKey(key)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: caHash, ID: id, Secret: sec, GossipKey: k}, nil
}

// String returns the text form ParseToken reads.
func (t Token) String() string {
	s := tokenPrefix + tokenSep + strings.TrimPrefix(t.CAHash, hashPrefix) + tokenSep + t.Bearer()
	if len(t.GossipKey) > 0 {
		s += tokenSep + secretEncoding.EncodeToString(t.GossipKey)
	}
	return s
}

// CAHash returns "sha256:<hex>" of the certificate's SubjectPublicKeyInfo,
// the format of kubeadm's --discovery-token-ca-cert-hash.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hashPrefix + hex.EncodeToString(sum[:])
}

const hashPrefix = "sha256:"

// AgentTokenInfo is one agent token in `isle token list`: never its
// secret, which the servers do not keep.
type AgentTokenInfo struct {
	ID          string    `json:"id"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	// Expires is zero for a token without a time to live.
	Expires time.Time `json:"expires,omitzero"`
}

// NewTokenResponse answers the creation of a token: the token, shown
// this once, and for an agent token what isle token list shows of it.
type NewTokenResponse struct {
	Token string         `json:"token"`
	Info  AgentTokenInfo `json:"info,omitzero"`
}

// SecretsStatus is the Secrets' encryption at rest, as `isle secrets
// status` shows it.
type SecretsStatus struct {
	// Primary encrypts what is stored now; once Rewritten is Primary,
	// every Secret is encrypted with it.
	Primary   string `json:"primary"`
	Rewritten string `json:"rewritten,omitempty"`
	// Keys are the keys held, oldest first.
	Keys []string `json:"keys"`
	// Secrets are the Secrets stored, ByKey how many under each key
	// ("none": in clear, stored before the cluster had a key).
	Secrets int            `json:"secrets"`
	ByKey   map[string]int `json:"byKey"`
}
