package board

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
)

// TestJoinGossipAndBoards: an agent joins the gossip through seeds that
// name itself too, and the control plane's view of the gossip (boards)
// shows the server as alive with its role and address, then dead once it
// stops answering.
func TestJoinGossipAndBoards(t *testing.T) {
	// Addresses of their own on loopback, so the default port is free.
	server, agent := netip.MustParseAddr("127.87.0.1"), netip.MustParseAddr("127.87.0.2")
	start := gossipStarter(t)
	s := start("s1", gossip.RoleServer, server)
	a := start("a1", gossip.RoleAgent, agent)
	cfg := Config{Address: agent, GossipPort: gossip.DefaultPort, Logger: slog.New(slog.DiscardHandler)}
	self := netip.AddrPortFrom(agent, gossip.DefaultPort).String()

	if !joinGossip(t.Context(), a, cfg, func() []string { return []string{self} }, 0) {
		t.Fatal("joinGossip with only itself to ask: not done")
	}
	if !joinGossip(t.Context(), a, cfg, func() []string { return []string{self, netip.AddrPortFrom(server, gossip.DefaultPort).String()} }, 0) {
		t.Fatal("joinGossip through the server: not joined")
	}
	b := boards{a}
	eventually(t, func() bool {
		m, ok := member(b, "s1")
		return ok && m.Role == wire.RoleServer && m.State == string(nodelifecycle.BoardAlive) && m.Address == server.String()
	})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		m, ok := member(b, "s1")
		for _, bd := range b.Boards() {
			if bd.Name == "s1" {
				return ok && m.State == string(nodelifecycle.BoardDead) && bd.State == nodelifecycle.BoardDead
			}
		}
		return false
	})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if joinGossip(ctx, a, cfg, func() []string { return []string{"127.87.0.9"} }, 0) {
		t.Error("joinGossip through nobody, its context ended: joined")
	}
	t0 := time.Now()
	if joinGossip(t.Context(), a, cfg, func() []string { return []string{"127.87.0.9"} }, 1) {
		t.Error("joinGossip through nobody, one attempt: joined")
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("one attempt through nobody took %v: it waited to retry", d)
	}
}

func member(b boards, name string) (wire.MemberInfo, bool) {
	for _, m := range b.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return wire.MemberInfo{}, false
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestKeepGossipAfterServerRestart: a server restarted with no seeds of
// its own (as when every server restarts at once) is found again by an
// agent that knew it, through keepGossip; without it the agent, which
// declared the server dead, would never hear of it again.
func TestKeepGossipAfterServerRestart(t *testing.T) {
	server, agent := netip.MustParseAddr("127.87.0.3"), netip.MustParseAddr("127.87.0.4")
	start := gossipStarter(t)
	s := start("s1", gossip.RoleServer, server)
	a := start("a1", gossip.RoleAgent, agent)
	cfg := Config{Address: agent, GossipPort: gossip.DefaultPort, Logger: slog.New(slog.DiscardHandler)}
	serverAddr := netip.AddrPortFrom(server, gossip.DefaultPort).String()
	if !joinGossip(t.Context(), a, cfg, func() []string { return []string{serverAddr} }, 0) {
		t.Fatal("joinGossip through the server: not joined")
	}
	state := func(name string) gossip.State {
		for _, m := range a.Members() {
			if m.Name == name {
				return m.State
			}
		}
		return ""
	}
	eventually(t, func() bool { return state("s1") == gossip.Alive })
	// The agent's seeds name no server: it must have remembered s1 from
	// the gossip itself.
	go keepGossip(t.Context(), a, cfg, func() []string { return nil }, 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { st := state("s1"); return st == gossip.Dead || st == gossip.Left || st == "" })
	s = start("s1", gossip.RoleServer, server)
	eventually(t, func() bool { return state("s1") == gossip.Alive })
	found := false
	for _, m := range s.Members() {
		found = found || m.Name == "a1" && m.State == gossip.Alive
	}
	if !found {
		t.Errorf("the restarted server does not see the agent: %+v", s.Members())
	}
}

// gossipStarter returns a function that starts a gossip member on
// loopback with fast test timings, stopped when the test ends.
func gossipStarter(t *testing.T) func(name string, role gossip.Role, addr netip.Addr) *gossip.Gossip {
	start := gossipMetaStarter(t)
	return func(name string, role gossip.Role, addr netip.Addr) *gossip.Gossip {
		return start(gossip.Meta{Name: name, Role: role, Arch: "arm64", Version: "test"}, addr)
	}
}

// gossipMetaStarter is gossipStarter for members of any metadata.
func gossipMetaStarter(t *testing.T) func(meta gossip.Meta, addr netip.Addr) *gossip.Gossip {
	key, err := gossip.DeriveKey("secret")
	if err != nil {
		t.Fatal(err)
	}
	return func(meta gossip.Meta, addr netip.Addr) *gossip.Gossip {
		name := meta.Name
		g, err := gossip.Start(gossip.Config{Meta: meta,
			Addr: addr, Port: gossip.DefaultPort, Key: key, Logger: slog.New(slog.DiscardHandler),
			Tuning: &gossip.Tuning{ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond, SuspicionMult: 3,
				GossipInterval: 50 * time.Millisecond, PushPull: 2 * time.Second}})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { _ = g.Stop() })
		return g
	}
}
