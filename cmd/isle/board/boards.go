package board

import (
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
)

// boards shows the control plane the gossip membership as its own
// cluster.Boards (and so nodelifecycle.Liveness).
type boards struct{ g *gossip.Gossip }

func (b boards) Changed() <-chan struct{} { return b.g.Changed() }

func (b boards) Forget(name string) { b.g.Forget(name) }

func (b boards) Boards() []nodelifecycle.Board {
	members := b.g.Members()
	out := make([]nodelifecycle.Board, 0, len(members))
	for _, m := range members {
		out = append(out, nodelifecycle.Board{Name: m.Name, State: boardState(m.State)})
	}
	return out
}

func (b boards) Members() []wire.MemberInfo {
	members := b.g.Members()
	out := make([]wire.MemberInfo, 0, len(members))
	for _, m := range members {
		out = append(out, wire.MemberInfo{Name: m.Name, Role: wire.Role(m.Role), State: string(boardState(m.State)), Since: m.Since,
			Address: m.Addr.Addr().String(), Arch: m.Arch, Version: m.Version})
	}
	return out
}

func boardState(s gossip.State) nodelifecycle.BoardState {
	switch s {
	case gossip.Suspect:
		return nodelifecycle.BoardSuspect
	case gossip.Dead:
		return nodelifecycle.BoardDead
	case gossip.Left:
		return nodelifecycle.BoardLeft
	}
	return nodelifecycle.BoardAlive
}
