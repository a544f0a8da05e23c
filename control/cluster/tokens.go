package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// Node credentials (bearer tokens) live in the store: the key under
// nodeTokenPrefix ends with the token's ID and holds the node's name and
// the token's hash; the key under nodeNamePrefix ends with the node's name
// and holds the ID of its one token, so a name belongs to one board.
const (
	nodeTokenPrefix = "/isle/nodetokens/"
	nodeNamePrefix  = "/isle/nodenames/"
)

type nodeToken struct {
	Node string `json:"node"`
	Hash string `json:"hash"`
}

type nodeName struct {
	TokenID string `json:"tokenID"`
}

// errNameTaken is a name that another board's credential holds.
var errNameTaken = errors.New("the name is taken")

// nodeTokens authenticates node bearer tokens against the store.
func nodeTokens(store *registry.Store) apiserver.TokenAuthenticator {
	return func(ctx context.Context, token string) (*apiserver.User, bool) {
		name, ok := nodeOfToken(store.Node().KV(), token)
		if !ok {
			return nil, false
		}
		return &authz.User{Name: authz.NodeUserPrefix + name, Groups: []string{authz.GroupNodes}}, true
	}
}

// nodeOfToken returns the node a token is the credential of.
func nodeOfToken(store *kv.Store, token string) (string, bool) {
	id, _, ok := pki.SplitBearer(token)
	if !ok {
		return "", false
	}
	v, found, _ := store.Get(nodeTokenPrefix + id)
	if !found {
		return "", false
	}
	var nt nodeToken
	if json.Unmarshal(v.Value, &nt) != nil || !pki.BearerMatches(token, nt.Hash) {
		return "", false
	}
	return nt.Node, true
}

// issueNodeToken makes the credential of a node whose name is free, and
// claims the name, in one transaction.
func issueNodeToken(ctx context.Context, node *raft.Node, name string) (string, error) {
	id, token, err := pki.NewBearerToken()
	if err != nil {
		return "", fmt.Errorf("node token: %w", err)
	}
	tok, _ := json.Marshal(nodeToken{Node: name, Hash: pki.HashBearer(token)})
	nm, _ := json.Marshal(nodeName{TokenID: id})
	res, err := node.Propose(ctx,
		kv.Op{Type: kv.OpPut, Key: nodeNamePrefix + name, Value: nm, IfModRev: 0},
		kv.Op{Type: kv.OpPut, Key: nodeTokenPrefix + id, Value: tok, IfModRev: 0})
	if err != nil {
		return "", fmt.Errorf("node token: %w", err)
	}
	switch {
	case res.Succeeded:
		return token, nil
	case res.FailedOp == 0:
		return "", fmt.Errorf("node token for %q: %w", name, errNameTaken)
	}
	return "", fmt.Errorf("node token: token ID %s is taken; try again", id)
}

// forgetNode deletes a node's credential and frees its name.
func forgetNode(ctx context.Context, node *raft.Node, name string) error {
	v, found, _ := node.KV().Get(nodeNamePrefix + name)
	if !found {
		return nil
	}
	var nm nodeName
	ops := []kv.Op{{Type: kv.OpDelete, Key: nodeNamePrefix + name, IfModRev: v.ModRevision}}
	if json.Unmarshal(v.Value, &nm) == nil && nm.TokenID != "" {
		ops = append(ops, kv.Op{Type: kv.OpDelete, Key: nodeTokenPrefix + nm.TokenID, IfModRev: -1})
	}
	if _, err := node.Propose(ctx, ops...); err != nil {
		return fmt.Errorf("forget node %q: %w", name, err)
	}
	return nil
}
