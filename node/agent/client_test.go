package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/gossip"
)

// startMember starts a gossip member on loopback with the given metadata.
func startMember(t *testing.T, meta gossip.Meta, key []byte) (*gossip.Gossip, string) {
	t.Helper()
	var lastErr error
	for range 20 { // a port found free may be taken by the time it is bound
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.LocalAddr().(*net.UDPAddr).Port
		l.Close()
		g, err := gossip.Start(gossip.Config{Meta: meta, Addr: netip.MustParseAddr("127.0.0.1"), Port: port, Key: key,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { _ = g.Stop() })
		return g, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	t.Fatalf("start a gossip member: %v", lastErr)
	return nil, ""
}

// An agent talks to whichever server gossip says is alive: when the one
// it used dies, the next connection goes to another, with no load
// balancer.
func TestServersFailOver(t *testing.T) {
	key, _ := gossip.DeriveKey("s3cret")
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	downAddr := down.Addr().String()
	down.Close() // a server whose API is gone

	self, _ := startMember(t, gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, key)
	_, s1 := startMember(t, gossip.Meta{Name: "s1", Role: gossip.RoleServer, API: downAddr}, key)
	_, s2 := startMember(t, gossip.Meta{Name: "s2", Role: gossip.RoleServer, API: up.Addr().String()}, key)
	if _, err := self.Join([]string{s1, s2}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(self.Servers()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("servers known: %+v", self.Servers())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := &servers{g: self, fallback: []string{"127.0.0.1:1"}}
	for range 5 {
		c, err := s.dial(context.Background(), "tcp", "ignored:443")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.Close()
		if s.current() != up.Addr().String() {
			t.Fatalf("connected to %s, want the live server %s", s.current(), up.Addr())
		}
	}
	// Nobody in gossip yet: the addresses the board joined through.
	lonely, _ := startMember(t, gossip.Meta{Name: "a2", Role: gossip.RoleAgent}, key)
	s = &servers{g: lonely, fallback: []string{up.Addr().String()}}
	if c, err := s.dial(context.Background(), "tcp", "x:1"); err != nil {
		t.Fatalf("fallback dial: %v", err)
	} else {
		c.Close()
	}
	s = &servers{g: lonely}
	if _, err := s.dial(context.Background(), "tcp", "x:1"); err == nil {
		t.Fatal("dialled with no server known")
	}
}
