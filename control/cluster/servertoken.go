package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// The server token is replaced (isle token rotate --server) by one
// record in the store, which every server follows:
//
//	/isle/server-token   the new secret sealed with the CA key (which only
//	                     servers hold), and its hash
//
// Each server writes the new token to DATA/token.next, reseals its CA key
// with the new secret, writes DATA/token and removes token.next
// (LoadIdentity repairs a crash between any two), then takes the new
// secret: the old one joins nothing from then on. The gossip key, derived
// from the first secret, stays (the boards' credentials keep it; the new
// token carries it), and so does every board's node credential.
const (
	serverTokenKey    = "/isle/server-token"
	tokenNextFile     = "token.next"
	infoServerToken   = "isle server token v1"
	serverTokenLookup = time.Second
)

type serverTokenRecord struct {
	Sealed  []byte    `json:"sealed"`
	Hash    string    `json:"hash"` // pki.HashBearer of the secret
	Rotated time.Time `json:"rotated"`
}

// serverTokens replaces and follows the server token.
type serverTokens struct {
	node      *raft.Node
	id        Identity
	gossipKey []byte // carried by the new token: its secret does not derive it
	dataDir   string
	log       *slog.Logger
	now       func() time.Time
	applied   int64 // the record's revision applied
}

// rotate makes a new server token, records it and applies it here.
func (s *serverTokens) rotate(ctx context.Context) (wire.Token, error) {
	if v, found, _ := s.node.KV().Get(caRotationKey); found {
		var rec wire.CARotation
		if json.Unmarshal(v.Value, &rec) == nil && rec.Phase != wire.CAPhaseDone {
			return wire.Token{}, fmt.Errorf("%w: the CA is being replaced (isle certs rotate-ca --status); rotate the server token once it is done", errConflict)
		}
	}
	tok, err := wire.NewToken(s.id.CA.Cert())
	if err != nil {
		return tok, err
	}
	tok.GossipKey = s.gossipKey
	sealed, err := pki.Seal([]byte(tok.Secret), string(s.id.CA.Signer().KeyPEM), infoServerToken)
	if err != nil {
		return tok, err
	}
	sealedKey, err := pki.Seal(s.id.CA.Signer().KeyPEM, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return tok, err
	}
	rec, _ := json.Marshal(serverTokenRecord{Sealed: sealed, Hash: pki.HashBearer(tok.Secret), Rotated: s.now().UTC()})
	var rev int64
	if v, found, _ := s.node.KV().Get(serverTokenKey); found {
		rev = v.ModRevision
	}
	res, err := s.node.Propose(ctx,
		kv.Op{Type: kv.OpPut, Key: serverTokenKey, Value: rec, IfModRev: rev},
		kv.Op{Type: kv.OpPut, Key: caKeySealedKey, Value: sealedKey, IfModRev: -1})
	switch {
	case err != nil:
		return tok, fmt.Errorf("rotate the server token: %w", err)
	case !res.Succeeded:
		return tok, fmt.Errorf("%w: another rotation of the server token came first; try again", errConflict)
	}
	if err := s.apply(); err != nil {
		return tok, fmt.Errorf("the server token is replaced, not yet here: %w", err)
	}
	s.log.Info("cluster: server token replaced")
	return tok, nil
}

// errConflict is a request that conflicts with the store's state.
var errConflict = errors.New("conflict")

// run follows the record until ctx ends.
func (s *serverTokens) run(ctx context.Context) {
	failed := ""
	for {
		if err := s.apply(); err != nil && err.Error() != failed {
			failed = err.Error()
			s.log.Error("cluster: the new server token is not taken here; trying again every second", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(serverTokenLookup):
		}
	}
}

// apply takes the recorded server token, if this server has not.
func (s *serverTokens) apply() error {
	v, found, _ := s.node.KV().Get(serverTokenKey)
	if !found || v.ModRevision == s.applied {
		return nil
	}
	var rec serverTokenRecord
	if err := json.Unmarshal(v.Value, &rec); err != nil {
		return fmt.Errorf("%s: %w", serverTokenKey, err)
	}
	if pki.BearerMatches(s.id.secret(), rec.Hash) {
		s.applied = v.ModRevision
		return nil
	}
	secret, err := pki.Open(rec.Sealed, string(s.id.CA.Signer().KeyPEM), infoServerToken)
	if err != nil {
		return fmt.Errorf("%s does not open with this server's CA key: %w", serverTokenKey, err)
	}
	tok := s.id.token()
	tok.Secret, tok.GossipKey = string(secret), s.gossipKey
	if err := saveServerToken(s.dataDir, s.id.CA, tok); err != nil {
		return err
	}
	s.id.live.Store(&tok)
	s.applied = v.ModRevision
	s.log.Info("cluster: the new server token is taken here")
	return nil
}

// saveServerToken writes tok as dir's token, with the CA key resealed
// with its secret, in the order LoadIdentity repairs.
func saveServerToken(dir string, ca *pki.CA, tok wire.Token) error {
	sealed, err := pki.Seal(ca.Signer().KeyPEM, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{tokenNextFile, []byte(tok.String() + "\n")}, {caKeySealed, sealed}, {tokenFile, []byte(tok.String() + "\n")}} {
		if err := writeFile(dir, f.name, f.data); err != nil {
			return fmt.Errorf("save the server token: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(dir, tokenNextFile)); err != nil {
		return fmt.Errorf("save the server token: %w", err)
	}
	return nil
}

// serve answers POST TokensPath/rotate?kind=server.
func (s *serverTokens) serve(w http.ResponseWriter, r *http.Request) {
	tok, err := s.rotate(r.Context())
	switch {
	case errors.Is(err, errConflict):
		httpError(w, http.StatusConflict, strings.TrimPrefix(err.Error(), errConflict.Error()+": "))
	case err != nil:
		httpError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeJSON(w, http.StatusOK, wire.NewTokenResponse{Token: tok.String()})
	}
}
