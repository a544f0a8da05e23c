package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// Agent tokens (wire.Token.IsAgent) admit agents alone: no CA key, no
// store membership, no member removal. The servers keep each one's hash
// under agentTokenPrefix+ID with its description and expiry; the token
// itself is shown once, when it is made, and the server that starts a
// cluster writes its first one to agentTokenFile.
//
// On the admin socket (root on a server), TokensPath serves `isle token`:
//
//	GET    /tokens                          the agent tokens (wire.AgentTokenInfo)
//	POST   /tokens?ttl=D&description=T      a new agent token (wire.NewTokenResponse)
//	DELETE /tokens/ID                       revoke one
//	POST   /tokens/rotate?kind=agent        revoke every agent token, make a new one
//	POST   /tokens/rotate?kind=server       a new server token (servertoken.go)
const (
	agentTokenPrefix = "/isle/agenttokens/"
	agentTokenFile   = "agent-token"
	TokensPath       = "/tokens"
	maxAgentTokens   = 1000
	maxTokenDesc     = 256
	maxTokenTTL      = 10 * 365 * 24 * time.Hour
)

type agentTokenRecord struct {
	Hash        string    `json:"hash"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires,omitzero"`
}

// errTokenRefused is a join or admin credential that is not accepted.
var errTokenRefused = errors.New("token refused")

// tokenKeeper makes, checks and revokes the agent tokens.
type tokenKeeper struct {
	node      *raft.Node
	ca        *pki.CA // its current certificate's hash goes into the tokens
	gossipKey []byte
	now       func() time.Time
	log       *slog.Logger
}

// checkAgent reports whether bearer (<id>.<secret>) is a valid agent
// token, and if not why, in words for the joiner.
func (k *tokenKeeper) checkAgent(bearer string) error {
	id, _, ok := wire.SplitAgentBearer(bearer)
	if !ok {
		return fmt.Errorf("%w: the token is not this cluster's", errTokenRefused)
	}
	v, found, _ := k.node.KV().Get(agentTokenPrefix + id)
	var rec agentTokenRecord
	if !found || json.Unmarshal(v.Value, &rec) != nil || !pki.BearerMatches(bearer, rec.Hash) {
		return fmt.Errorf("%w: the token is not this cluster's, or it was revoked", errTokenRefused)
	}
	if !rec.Expires.IsZero() && !k.now().Before(rec.Expires) {
		return fmt.Errorf("%w: agent token %s expired at %s", errTokenRefused, id, rec.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// records returns the agent tokens by ID, with their store revisions.
func (k *tokenKeeper) records() (map[string]agentTokenRecord, map[string]int64) {
	recs, revs := map[string]agentTokenRecord{}, map[string]int64{}
	kvs, _, _ := k.node.KV().List(agentTokenPrefix, "", maxAgentTokens+1)
	for _, v := range kvs {
		var rec agentTokenRecord
		if json.Unmarshal(v.Value, &rec) == nil {
			id := strings.TrimPrefix(v.Key, agentTokenPrefix)
			recs[id], revs[id] = rec, v.ModRevision
		}
	}
	return recs, revs
}

func (k *tokenKeeper) list() []wire.AgentTokenInfo {
	recs, _ := k.records()
	out := make([]wire.AgentTokenInfo, 0, len(recs))
	for id, r := range recs {
		out = append(out, wire.AgentTokenInfo{ID: id, Description: r.Description, Created: r.Created, Expires: r.Expires})
	}
	slices.SortFunc(out, func(a, b wire.AgentTokenInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// create makes an agent token valid for ttl (0: until revoked). Tokens
// expired a day ago go in the same transaction; revokeAll (rotation)
// revokes every other one too.
func (k *tokenKeeper) create(ctx context.Context, ttl time.Duration, desc string, revokeAll bool) (wire.NewTokenResponse, error) {
	var resp wire.NewTokenResponse
	id, bearer, err := pki.NewBearerToken()
	if err != nil {
		return resp, err
	}
	tok, err := wire.AgentToken(wire.CAHash(k.ca.Cert()), bearer, k.gossipKey)
	if err != nil {
		return resp, err
	}
	now := k.now().UTC().Truncate(time.Second)
	rec := agentTokenRecord{Hash: pki.HashBearer(bearer), Description: desc, Created: now}
	if ttl > 0 {
		rec.Expires = now.Add(ttl)
	}
	val, _ := json.Marshal(rec)
	ops := []kv.Op{{Type: kv.OpPut, Key: agentTokenPrefix + id, Value: val, IfModRev: 0}}
	recs, revs := k.records()
	for old, r := range recs {
		if revokeAll || !r.Expires.IsZero() && now.Sub(r.Expires) > 24*time.Hour {
			ops = append(ops, kv.Op{Type: kv.OpDelete, Key: agentTokenPrefix + old, IfModRev: revs[old]})
			delete(recs, old)
		}
	}
	if len(recs) >= maxAgentTokens {
		return resp, fmt.Errorf("%d agent tokens exist, the most there may be: revoke some (isle token revoke ID)", len(recs))
	}
	res, err := k.node.Propose(ctx, ops...)
	switch {
	case err != nil:
		return resp, fmt.Errorf("agent token: %w", err)
	case !res.Succeeded:
		return resp, errors.New("agent token: the tokens changed meanwhile; try again")
	}
	resp.Token = tok.String()
	resp.Info = wire.AgentTokenInfo{ID: id, Description: desc, Created: rec.Created, Expires: rec.Expires}
	k.log.Info("cluster: agent token made", "id", id, "expires", rec.Expires, "revokedOthers", revokeAll)
	return resp, nil
}

// revoke deletes the agent token id; it reports whether there was one.
func (k *tokenKeeper) revoke(ctx context.Context, id string) (bool, error) {
	v, found, _ := k.node.KV().Get(agentTokenPrefix + id)
	if !found {
		return false, nil
	}
	if _, err := k.node.Propose(ctx, kv.Op{Type: kv.OpDelete, Key: agentTokenPrefix + id, IfModRev: v.ModRevision}); err != nil {
		return false, fmt.Errorf("revoke agent token %s: %w", id, err)
	}
	k.log.Info("cluster: agent token revoked", "id", id)
	return true, nil
}

// first makes the new cluster's first agent token, until it succeeds or
// ctx ends, and writes it to dir's agentTokenFile.
func (k *tokenKeeper) first(ctx context.Context, dir string) {
	for {
		resp, err := k.create(ctx, 0, "made when the cluster started", false)
		if err == nil {
			if err := writeFile(dir, agentTokenFile, []byte(resp.Token+"\n")); err != nil {
				k.log.Error("cluster: the first agent token is not saved; make one with isle token create --agent", "err", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// handler serves TokensPath on the admin socket.
func (k *tokenKeeper) handler(server *serverTokens) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+TokensPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, k.list())
	})
	mux.HandleFunc("POST "+TokensPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var ttl time.Duration
		if s := q.Get("ttl"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > maxTokenTTL {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("ttl %q: want a duration above 0 and at most %v (e.g. 24h)", s, maxTokenTTL))
				return
			}
			ttl = d
		}
		desc := q.Get("description")
		if len(desc) > maxTokenDesc || !utf8.ValidString(desc) || strings.ContainsAny(desc, "\n\r\t") {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("description: want one line of UTF-8 text of at most %d bytes", maxTokenDesc))
			return
		}
		resp, err := k.create(r.Context(), ttl, desc, false)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, resp)
	})
	mux.HandleFunc("DELETE "+TokensPath+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !wire.ValidAgentTokenID(id) {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("%q is not an agent token's ID (6 of a-z and 0-9; isle token list shows them)", id))
			return
		}
		found, err := k.revoke(r.Context(), id)
		switch {
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, err.Error())
		case !found:
			httpError(w, http.StatusNotFound, fmt.Sprintf("no agent token %s", id))
		default:
			writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
		}
	})
	mux.HandleFunc("POST "+TokensPath+"/rotate", func(w http.ResponseWriter, r *http.Request) {
		switch kind := r.URL.Query().Get("kind"); kind {
		case "agent":
			resp, err := k.create(r.Context(), 0, "made by isle token rotate --agent", true)
			if err != nil {
				httpError(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			writeJSON(w, http.StatusOK, resp)
		case "server":
			server.serve(w, r)
		default:
			httpError(w, http.StatusBadRequest, fmt.Sprintf("kind %q: want agent or server", kind))
		}
	})
	return mux
}
