package cluster

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// Secrets are encrypted as they are stored (registry.ValueCipher):
// AES-256-GCM with the value's store key as additional data, written as
// kube-apiserver's aesgcm provider writes them: "k8s:enc:aesgcm:v1:",
// the key's name, ":", a 12-byte nonce and the sealed value. So the WAL,
// the snapshots and the backups hold no Secret in clear.
//
// The keys are random and live in the store, each sealed with the CA's
// key, which only the servers hold (on disk sealed with the server
// token), in one record every server follows:
//
//	/isle/secrets-keys   the keys (sealed), the primary one, and the one
//	                     every Secret is stored under once rewritten
//
// The leader makes the first key once every store member runs this
// release (rafttls.go), rewrites each Secret stored under another key or
// none (the ones stored before, after a rotation, or by a server that had
// not read the record yet), keeps only the primary key and the one
// before, and reseals the keys when the CA is replaced. `isle secrets
// rotate-key` adds a key and makes it primary.
const (
	secretsKeysKey    = "/isle/secrets-keys"
	secretsTag        = "k8s:enc:aesgcm:v1:"
	infoSecretsKey    = "isle secrets key v1"
	SecretsPath       = "/secrets" // admin socket: GET the status; POST SecretsPath/rotate-key
	secretsLookup     = time.Second
	secretsScanEvery  = 10 * time.Second
	secretsKeysToKeep = 2
)

type secretsKeyRecord struct {
	Primary   string      `json:"primary"`
	Rewritten string      `json:"rewritten,omitempty"`
	CA        string      `json:"ca"` // hash of the CA whose key sealed them
	Keys      []sealedKey `json:"keys"`
}

type sealedKey struct {
	Name   string `json:"name"`
	Sealed []byte `json:"sealed"`
}

type secretsKey struct {
	raw  []byte
	aead cipher.AEAD
}

// secretsKeys holds the keys and encrypts and decrypts with them.
type secretsKeys struct {
	node *raft.Node
	ca   *pki.CA
	log  *slog.Logger

	mu      sync.RWMutex
	keys    map[string]secretsKey
	primary string
	loaded  int64 // the record's revision held
}

var _ registry.ValueCipher = (*secretsKeys)(nil)

// Seal encrypts a Secret to store under key with the primary key. Before
// the cluster has keys, values stay in clear (the leader rewrites them
// once it has); once it has and this server has not read them, it fails.
func (k *secretsKeys) Seal(key string, plain []byte) ([]byte, error) {
	k.mu.RLock()
	sk, name := k.keys[k.primary], k.primary
	k.mu.RUnlock()
	if sk.aead == nil {
		if _, found, _ := k.node.KV().Get(secretsKeysKey); found {
			return nil, errors.New("the keys are recorded but not read here yet")
		}
		return plain, nil
	}
	nonce := make([]byte, sk.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte(secretsTag+name+":"), nonce...)
	return sk.aead.Seal(out, nonce, plain, []byte(key)), nil
}

// Open decrypts a Secret stored under key; one stored in clear is
// returned as it is.
func (k *secretsKeys) Open(key string, stored []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(secretsTag))
	if !ok {
		return stored, nil
	}
	name, sealed, ok := bytes.Cut(rest, []byte(":"))
	if !ok {
		return nil, errors.New("an encrypted value without its key's name")
	}
	k.mu.RLock()
	sk := k.keys[string(name)]
	k.mu.RUnlock()
	if sk.aead == nil {
		return nil, fmt.Errorf("encrypted with key %q, which this server does not hold", name)
	}
	n := sk.aead.NonceSize()
	if len(sealed) < n+sk.aead.Overhead() {
		return nil, fmt.Errorf("an encrypted value of %d bytes, too short", len(sealed))
	}
	plain, err := sk.aead.Open(nil, sealed[:n], sealed[n:], []byte(key))
	if err != nil {
		return nil, fmt.Errorf("does not decrypt with key %q: %w", name, err)
	}
	return plain, nil
}

// underPrimary reports whether a stored value is encrypted with the
// primary key.
func (k *secretsKeys) underPrimary(stored []byte) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.primary != "" && bytes.HasPrefix(stored, []byte(secretsTag+k.primary+":"))
}

func (k *secretsKeys) record() (secretsKeyRecord, int64, bool, error) {
	var rec secretsKeyRecord
	v, found, _ := k.node.KV().Get(secretsKeysKey)
	if !found {
		return rec, 0, false, nil
	}
	if err := json.Unmarshal(v.Value, &rec); err != nil {
		return rec, v.ModRevision, true, fmt.Errorf("%s: %w", secretsKeysKey, err)
	}
	return rec, v.ModRevision, true, nil
}

// load reads the record's keys, when it changed.
func (k *secretsKeys) load() error {
	rec, rev, found, err := k.record()
	if !found || err != nil {
		return err
	}
	k.mu.RLock()
	loaded := k.loaded
	k.mu.RUnlock()
	if rev == loaded {
		return nil
	}
	signer := k.ca.Signer()
	if rec.CA != wire.CAHash(signer.Cert) {
		// The CA is being replaced: the leader reseals the keys with the
		// new one, which this server signs with soon.
		return fmt.Errorf("the keys are sealed by CA %s, this server signs with %s", rec.CA, wire.CAHash(signer.Cert))
	}
	keys := map[string]secretsKey{}
	for _, sk := range rec.Keys {
		raw, err := pki.Open(sk.Sealed, string(signer.KeyPEM), infoSecretsKey)
		if err != nil {
			return fmt.Errorf("key %q does not open with the CA key: %w", sk.Name, err)
		}
		if keys[sk.Name], err = newSecretsKey(raw); err != nil {
			return err
		}
	}
	if _, ok := keys[rec.Primary]; !ok {
		return fmt.Errorf("%s: the primary key %q is not among the keys", secretsKeysKey, rec.Primary)
	}
	k.mu.Lock()
	k.keys, k.primary, k.loaded = keys, rec.Primary, rev
	k.mu.Unlock()
	return nil
}

func newSecretsKey(raw []byte) (secretsKey, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return secretsKey{}, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return secretsKey{}, fmt.Errorf("secrets key: %w", err)
	}
	return secretsKey{raw: raw, aead: aead}, nil
}

// follow keeps the keys as recorded until ctx ends.
func (k *secretsKeys) follow(ctx context.Context) {
	failed := ""
	for {
		if err := k.load(); err != nil && err.Error() != failed {
			failed = err.Error()
			k.log.Warn("cluster: the Secrets' keys are not read here yet; trying again every second", "err", err)
		} else if err == nil {
			failed = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(secretsLookup):
		}
	}
}

// newKey returns a fresh key and its name, sealed with the CA key.
func (k *secretsKeys) newKey() (sealedKey, error) {
	raw := make([]byte, 32)
	id := make([]byte, 4)
	if _, err := rand.Read(raw); err != nil {
		return sealedKey{}, err
	}
	if _, err := rand.Read(id); err != nil {
		return sealedKey{}, err
	}
	sealed, err := pki.Seal(raw, string(k.ca.Signer().KeyPEM), infoSecretsKey)
	if err != nil {
		return sealedKey{}, err
	}
	return sealedKey{Name: "key-" + hex.EncodeToString(id), Sealed: sealed}, nil
}

// put records rec if the record is still at revision rev.
func (k *secretsKeys) put(ctx context.Context, rec secretsKeyRecord, rev int64) error {
	b, _ := json.Marshal(rec)
	res, err := k.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: secretsKeysKey, Value: b, IfModRev: rev})
	switch {
	case err != nil:
		return err
	case !res.Succeeded:
		return fmt.Errorf("%w: %s changed meanwhile", errConflict, secretsKeysKey)
	}
	return k.load()
}

// maintain, on the leader, makes the first key, reseals the keys for a
// new CA, and rewrites the Secrets not under the primary key, until ctx
// ends.
func (k *secretsKeys) maintain(ctx context.Context) {
	failed := ""
	for {
		if err := k.upkeep(ctx); err != nil && ctx.Err() == nil && err.Error() != failed {
			failed = err.Error()
			k.log.Warn("cluster: the Secrets' encryption: upkeep failed; trying again", "err", err)
		}
		wait := secretsScanEvery
		if _, found, _ := k.node.KV().Get(secretsKeysKey); !found {
			wait = secretsLookup // soon, the first key
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (k *secretsKeys) upkeep(ctx context.Context) error {
	rec, rev, found, err := k.record()
	if err != nil {
		return err
	}
	if !found {
		// A server of a release without the keys would not read what is
		// encrypted: wait until every member runs this one.
		if _, tls, _ := k.node.KV().Get(raftTLSKey); !tls {
			return nil
		}
		first, err := k.newKey()
		if err != nil {
			return err
		}
		k.log.Info("cluster: the Secrets are encrypted from now on", "key", first.Name)
		return k.put(ctx, secretsKeyRecord{Primary: first.Name, CA: wire.CAHash(k.ca.Cert()), Keys: []sealedKey{first}}, 0)
	}
	if cur := wire.CAHash(k.ca.Cert()); rec.CA != cur {
		return k.reseal(ctx, rec, rev, cur)
	}
	if err := k.load(); err != nil {
		return err
	}
	left, err := k.rewrite(ctx)
	if err != nil || left > 0 {
		return err
	}
	if rec.Rewritten == rec.Primary && len(rec.Keys) <= secretsKeysToKeep {
		return nil
	}
	// Every Secret is under the primary key: the keys before the one
	// before it go.
	rec.Rewritten = rec.Primary
	if n := len(rec.Keys); n > secretsKeysToKeep {
		rec.Keys = rec.Keys[n-secretsKeysToKeep:]
	}
	k.log.Info("cluster: every Secret is encrypted with the primary key", "key", rec.Primary)
	return k.put(ctx, rec, rev)
}

// reseal seals the keys with the CA now signing, from those this server
// holds.
func (k *secretsKeys) reseal(ctx context.Context, rec secretsKeyRecord, rev int64, ca string) error {
	k.mu.RLock()
	held := k.keys
	k.mu.RUnlock()
	signer := k.ca.Signer()
	for i, sk := range rec.Keys {
		h, ok := held[sk.Name]
		if !ok {
			return fmt.Errorf("key %q is not held here: the keys are not resealed for the new CA", sk.Name)
		}
		sealed, err := pki.Seal(h.raw, string(signer.KeyPEM), infoSecretsKey)
		if err != nil {
			return err
		}
		rec.Keys[i].Sealed = sealed
	}
	rec.CA = ca
	k.log.Info("cluster: the Secrets' keys resealed for the new CA", "ca", ca)
	return k.put(ctx, rec, rev)
}

// rewrite stores anew, under the primary key, each Secret stored under
// another or none, and returns how many it could not (changed meanwhile:
// the next pass looks again).
func (k *secretsKeys) rewrite(ctx context.Context) (int, error) {
	left := 0
	start := ""
	for {
		kvs, more, _ := k.node.KV().List(registry.SecretsPrefix, start, 500)
		for _, v := range kvs {
			if k.underPrimary(v.Value) {
				continue
			}
			plain, err := k.Open(v.Key, v.Value)
			if err != nil {
				k.log.Error("cluster: a Secret does not decrypt; left as it is", "key", v.Key, "err", err)
				left++
				continue
			}
			sealed, err := k.Seal(v.Key, plain)
			if err != nil {
				return left, err
			}
			res, err := k.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: v.Key, Value: sealed, IfModRev: v.ModRevision})
			if err != nil {
				return left, fmt.Errorf("rewrite %s: %w", v.Key, err)
			}
			if !res.Succeeded {
				left++
			}
		}
		if !more || len(kvs) == 0 {
			return left, nil
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}

// rotate adds a key and makes it primary; the leader rewrites the Secrets
// with it.
func (k *secretsKeys) rotate(ctx context.Context) error {
	rec, rev, found, err := k.record()
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: the cluster has no key yet (its servers are being upgraded?)", errConflict)
	case rec.Rewritten != rec.Primary:
		return fmt.Errorf("%w: the Secrets are still being rewritten with key %s (isle secrets status)", errConflict, rec.Primary)
	case rec.CA != wire.CAHash(k.ca.Cert()):
		return fmt.Errorf("%w: the CA is being replaced; rotate the key once it is done", errConflict)
	}
	next, err := k.newKey()
	if err != nil {
		return err
	}
	rec.Keys = append(rec.Keys, next)
	rec.Primary = next.Name
	k.log.Info("cluster: a new key for the Secrets", "key", next.Name)
	return k.put(ctx, rec, rev)
}

// status is what `isle secrets status` shows.
func (k *secretsKeys) status() (wire.SecretsStatus, error) {
	rec, _, _, err := k.record()
	if err != nil {
		return wire.SecretsStatus{}, err
	}
	st := wire.SecretsStatus{Primary: rec.Primary, Rewritten: rec.Rewritten, ByKey: map[string]int{}}
	for _, sk := range rec.Keys {
		st.Keys = append(st.Keys, sk.Name)
	}
	start := ""
	for {
		kvs, more, _ := k.node.KV().List(registry.SecretsPrefix, start, 500)
		for _, v := range kvs {
			st.Secrets++
			name := "none"
			if rest, ok := bytes.CutPrefix(v.Value, []byte(secretsTag)); ok {
				name, _, _ = strings.Cut(string(rest[:min(len(rest), 64)]), ":")
			}
			st.ByKey[name]++
		}
		if !more || len(kvs) == 0 {
			break
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
	return st, nil
}

// handler serves SecretsPath on the admin socket.
func (k *secretsKeys) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+SecretsPath, func(w http.ResponseWriter, r *http.Request) {
		st, err := k.status()
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST "+SecretsPath+"/rotate-key", func(w http.ResponseWriter, r *http.Request) {
		err := k.rotate(r.Context())
		switch {
		case errors.Is(err, errConflict):
			httpError(w, http.StatusConflict, strings.TrimPrefix(err.Error(), errConflict.Error()+": "))
			return
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		st, err := k.status()
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	return mux
}
