package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// nodeTokenPrefix is where node bearer tokens are kept: the key ends with
// the token's ID; the value holds the node's name and the token's hash.
const nodeTokenPrefix = "/isle/nodetokens/"

type nodeToken struct {
	Node string `json:"node"`
	Hash string `json:"hash"`
}

// nodeTokens authenticates node bearer tokens against the store.
func nodeTokens(store *registry.Store) apiserver.TokenAuthenticator {
	return func(ctx context.Context, token string) (*apiserver.User, bool) {
		id, _, ok := pki.SplitBearer(token)
		if !ok {
			return nil, false
		}
		v, found, _ := store.Node().KV().Get(nodeTokenPrefix + id)
		if !found {
			return nil, false
		}
		var nt nodeToken
		if json.Unmarshal(v.Value, &nt) != nil || !pki.BearerMatches(token, nt.Hash) {
			return nil, false
		}
		return &apiserver.User{Name: apiserver.NodeUserPrefix + nt.Node, Groups: []string{apiserver.GroupNodes}}, true
	}
}

// issueNodeToken makes a new bearer token for a node and stores its hash.
func issueNodeToken(ctx context.Context, node *raft.Node, name string) (string, error) {
	id, token, err := pki.NewBearerToken()
	if err != nil {
		return "", fmt.Errorf("node token: %w", err)
	}
	b, _ := json.Marshal(nodeToken{Node: name, Hash: pki.HashBearer(token)})
	res, err := node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: nodeTokenPrefix + id, Value: b, IfModRev: 0})
	if err != nil {
		return "", fmt.Errorf("node token: %w", err)
	}
	if !res.Succeeded {
		return "", fmt.Errorf("node token: token ID %s is taken; try again", id)
	}
	return token, nil
}
