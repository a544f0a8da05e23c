package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/satoken"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// saKeysPrefix holds the public key of every key that signed
// service-account tokens (the key ID ends the key): the signing key is
// derived from the CA key, and a replaced CA's stays here so that the
// tokens it signed stay valid until they expire.
const saKeysPrefix = "/isle/sa-keys/"

type saKeyRecord struct {
	PublicKey []byte    `json:"publicKey"` // PEM
	Since     time.Time `json:"since"`
}

// saTokens issues and verifies service-account tokens on a server.
type saTokens struct {
	node *raft.Node
	ca   *pki.CA
	log  *slog.Logger
	now  func() time.Time

	mu     sync.Mutex
	signer *ecdsa.PrivateKey // derived from signerOf
	caPEM  string            // the CA key it was derived from
	keys   map[string]*ecdsa.PublicKey
	keysAt string // the records' count and latest revision when keys were read
}

// signingKey is the key derived from the CA's current key.
func (s *saTokens) signingKey() (*ecdsa.PrivateKey, error) {
	kp := s.ca.Signer()
	if kp == nil {
		return nil, fmt.Errorf("service-account tokens: no CA key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer != nil && s.caPEM == string(kp.KeyPEM) {
		return s.signer, nil
	}
	key, err := satoken.SigningKey(kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	s.signer, s.caPEM = key, string(kp.KeyPEM)
	return key, nil
}

// publish records the signing key's public key, once, until ctx ends
// (again after a CA replacement).
func (s *saTokens) publish(ctx context.Context) {
	recorded := ""
	for {
		key, err := s.signingKey()
		if err == nil {
			var kid string
			if kid, err = satoken.KeyID(&key.PublicKey); err == nil && kid != recorded {
				if err = s.record(ctx, kid, &key.PublicKey); err == nil {
					recorded = kid
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("cluster: the service-account token key is not recorded yet; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

func (s *saTokens) record(ctx context.Context, kid string, pub *ecdsa.PublicKey) error {
	if _, found, _ := s.node.KV().Get(saKeysPrefix + kid); found {
		return nil
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(saKeyRecord{PublicKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), Since: s.now().UTC()})
	_, err = s.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: saKeysPrefix + kid, Value: b, IfModRev: 0})
	return err
}

// publicKeys are the recorded keys, read again when the store changed.
func (s *saTokens) publicKeys() map[string]*ecdsa.PublicKey {
	kvs, _, _ := s.node.KV().List(saKeysPrefix, "", 0)
	var latest int64
	for _, v := range kvs {
		latest = max(latest, v.ModRevision)
	}
	at := fmt.Sprintf("%d/%d", len(kvs), latest)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys != nil && at == s.keysAt {
		return s.keys
	}
	keys := map[string]*ecdsa.PublicKey{}
	for _, v := range kvs {
		var rec saKeyRecord
		if json.Unmarshal(v.Value, &rec) != nil {
			continue
		}
		block, _ := pem.Decode(rec.PublicKey)
		if block == nil {
			continue
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if ec, ok := pub.(*ecdsa.PublicKey); err == nil && ok {
			keys[v.Key[len(saKeysPrefix):]] = ec
		}
	}
	s.keys, s.keysAt = keys, at
	return keys
}

// Issue signs a token.
func (s *saTokens) Issue(req satoken.Request) (string, time.Time, error) {
	key, err := s.signingKey()
	if err != nil {
		return "", time.Time{}, err
	}
	return satoken.Issue(key, req, s.now())
}

// IssueLegacy signs a Secret's token.
func (s *saTokens) IssueLegacy(namespace, serviceAccount, saUID, secret string) (string, error) {
	key, err := s.signingKey()
	if err != nil {
		return "", err
	}
	return satoken.IssueLegacy(key, namespace, serviceAccount, saUID, secret)
}

// Verify checks a token's signature, times and audiences.
func (s *saTokens) Verify(token string, audiences []string) (*satoken.Claims, error) {
	return satoken.Verify(token, s.publicKeys(), audiences, s.now())
}

// JWKS is the recorded keys' set.
func (s *saTokens) JWKS() jose.JSONWebKeySet { return satoken.JWKS(s.publicKeys()) }
