package board

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

// join is a board's first start, a server's or an agent's: with the
// cluster token, find the servers through the gossip of any board at
// cfg.Join (none: the boards of the token's cluster on the LAN), set the
// board's clock by theirs, ask one to take the board in as req says, and
// return its answer and the board's node credential, not saved yet.
func join(ctx context.Context, cfg Config, req wire.JoinRequest) (wire.Token, wire.JoinResponse, wire.Credential, error) {
	log := cfg.Logger
	tok, err := wire.ParseToken(cfg.Token)
	if err != nil {
		return tok, wire.JoinResponse{}, wire.Credential{}, fmt.Errorf("--token: %w", err)
	}
	if tok.IsAgent() && req.Role == wire.RoleServer {
		return tok, wire.JoinResponse{}, wire.Credential{}, errors.New("--token: an agent token admits agents only; a server joins with the server token (the file token in a server's data directory)")
	}
	seeds := cfg.Join
	if len(seeds) == 0 {
		if !cfg.MDNS {
			return tok, wire.JoinResponse{}, wire.Credential{}, errors.New("no --join given and --mdns is off: give --join ADDR of any board of the cluster")
		}
		if seeds, err = gossip.FindOnLAN(ctx, cfg.Address, tok.CAHash, log); err != nil {
			return tok, wire.JoinResponse{}, wire.Credential{}, err
		}
	}
	// An agent token or a replaced server token carries the gossip key;
	// the cluster's first server token derives it.
	key := tok.GossipKey
	if key == nil {
		if key, err = gossip.DeriveKey(tok.Secret); err != nil {
			return tok, wire.JoinResponse{}, wire.Credential{}, err
		}
	}
	found, err := gossip.DiscoverRetry(ctx, cfg.Address, key, seeds, log)
	if err != nil {
		return tok, wire.JoinResponse{}, wire.Credential{}, fmt.Errorf("join: %w", err)
	}
	// The first certificate a board checks is the server's, here.
	settleClock(ctx, cfg, tok.CAHash, bootstrap.APIAddrs(found))
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := bootstrap.NewClient(tok, cfg.Clock.Now).Join(jctx, bootstrap.APIAddrs(found), req, "")
	if err != nil {
		return tok, resp, wire.Credential{}, err
	}
	var servers []string
	for _, m := range found {
		if m.Role == gossip.RoleServer {
			servers = append(servers, m.Addr.String())
		}
	}
	return tok, resp, wire.Credential{Name: req.Name, NodeToken: resp.NodeToken, CACert: resp.CACert, GossipKey: key, Servers: servers}, nil
}
