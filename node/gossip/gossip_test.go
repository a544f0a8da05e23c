package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var fast = Tuning{ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond, SuspicionMult: 3,
	GossipInterval: 50 * time.Millisecond, PushPull: 2 * time.Second}

var lo = netip.MustParseAddr("127.0.0.1")

func key(t *testing.T, secret string) []byte {
	t.Helper()
	k, err := DeriveKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type board struct {
	*Gossip
	addr string
	reg  *prometheus.Registry
}

func start(t *testing.T, name string, role Role, k []byte) *board {
	t.Helper()
	return startTuned(t, name, role, k, fast)
}

func startTuned(t *testing.T, name string, role Role, k []byte, tuning Tuning) *board {
	t.Helper()
	reg := prometheus.NewRegistry()
	// The kernel chooses the port (memberlist binds TCP and UDP on it, and
	// tries again when another socket holds the UDP one).
	g, err := Start(Config{Meta: Meta{Name: name, Role: role, Arch: "arm64", Version: "test"}, Addr: lo, Port: anyPort,
		Key: k, Tuning: &tuning, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = g.Stop() })
	port := int(g.ml.LocalNode().Port)
	return &board{Gossip: g, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), reg: reg}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stateOf(g *Gossip, name string) (Member, bool) {
	for _, m := range g.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func wantState(g *Gossip, name string, st State) func() error {
	return func() error {
		m, ok := stateOf(g, name)
		if !ok {
			return fmt.Errorf("%s unknown", name)
		}
		if m.State != st {
			return fmt.Errorf("%s is %s, want %s", name, m.State, st)
		}
		return nil
	}
}

func TestMembershipAndLiveness(t *testing.T) {
	k := key(t, "s3cret")
	a := start(t, "a", RoleServer, k)
	b := start(t, "b", RoleAgent, k)
	c := start(t, "c", RoleAgent, k)
	if n, err := b.Join([]string{a.addr}); err != nil || n != 1 {
		t.Fatalf("b joins a: %d, %v", n, err)
	}
	if _, err := c.Join([]string{b.addr}); err != nil {
		t.Fatalf("c joins b (an agent): %v", err)
	}
	for _, g := range []*board{a, b, c} {
		for _, name := range []string{"a", "b", "c"} {
			eventually(t, g.Self().Name+" sees "+name, wantState(g.Gossip, name, Alive))
		}
	}
	if s := c.Servers(); len(s) != 1 || s[0].Name != "a" || s[0].Role != RoleServer || s[0].Arch != "arm64" {
		t.Fatalf("c's servers: %+v", s)
	}

	changed := a.Changed()
	if err := c.UpdateMeta(func(m *Meta) { m.PodCIDR = "10.42.3.0/24" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees c's pod CIDR", func() error {
		if m, _ := stateOf(a.Gossip, "c"); m.PodCIDR != "10.42.3.0/24" {
			return fmt.Errorf("pod CIDR %q", m.PodCIDR)
		}
		return nil
	})
	select {
	case <-changed:
	default:
		t.Fatal("Changed was not closed by a metadata update")
	}
	if err := c.UpdateMeta(func(m *Meta) { m.Name = "other" }); err == nil {
		t.Fatal("renaming a member was accepted")
	}

	// A board that vanishes is suspected, then dead; one that leaves is left.
	_ = c.Stop()
	eventually(t, "a declares c dead", wantState(a.Gossip, "c", Dead))
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees b left", wantState(a.Gossip, "b", Left))
	a.Forget("b")
	if _, ok := stateOf(a.Gossip, "b"); ok {
		t.Fatal("forgotten member still listed")
	}
}

// Push gets a board's new metadata to the others at once, over TCP, when
// its broadcast has not gone out: here gossip rounds and probes, which
// carry broadcasts, are an hour apart.
func TestPush(t *testing.T) {
	slow := Tuning{ProbeInterval: time.Hour, ProbeTimeout: time.Second, SuspicionMult: 3, GossipInterval: time.Hour, PushPull: time.Hour}
	k := key(t, "secret")
	a, b := startTuned(t, "a", RoleAgent, k, slow), startTuned(t, "b", RoleServer, k, slow)
	if _, err := b.Join([]string{a.addr}); err != nil {
		t.Fatal(err)
	}
	cidr := func(g *board, name string) string {
		for _, m := range g.Members() {
			if m.Name == name {
				return m.PodCIDR
			}
		}
		return ""
	}
	// UpdateMeta waits (5 s) for its broadcast to go out, which it does
	// not; this board's own state has the new metadata at once.
	updated := make(chan error, 1)
	go func() { updated <- a.UpdateMeta(func(m *Meta) { m.PodCIDR = "10.42.7.0/24" }) }()
	eventually(t, "a's own state with its pod CIDR", func() error {
		if cidr(a, "a") != "10.42.7.0/24" {
			return errors.New("not yet")
		}
		return nil
	})
	if got := cidr(b, "a"); got != "" {
		t.Fatalf("b has a's pod CIDR %q before the push: the test's gossip is not slow enough", got)
	}
	if n := a.Push(); n != 1 {
		t.Errorf("Push reached %d boards, want 1", n)
	}
	// b merges what it got as it answers, maybe just after a's Push
	// returned.
	eventually(t, "b with a's pod CIDR after the push", func() error {
		if got := cidr(b, "a"); got != "10.42.7.0/24" {
			return fmt.Errorf("b has a's pod CIDR %q", got)
		}
		return nil
	})
	<-updated
}

func TestRestartedBoardIsAliveAgain(t *testing.T) {
	k := key(t, "s3cret")
	a := start(t, "a", RoleServer, k)
	b := start(t, "b", RoleAgent, k)
	if _, err := b.Join([]string{a.addr}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees b", wantState(a.Gossip, "b", Alive))
	port := b.addr[len("127.0.0.1:"):]
	_ = b.Stop()
	eventually(t, "a declares b dead", wantState(a.Gossip, "b", Dead))

	// Same name, same address, a fresh process: a new incarnation refutes
	// the old death.
	p, _ := strconv.Atoi(port)
	g, err := Start(Config{Meta: Meta{Name: "b", Role: RoleAgent, Arch: "arm", Version: "test"}, Addr: lo, Port: p,
		Key: k, Tuning: &fast, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if _, err := g.Join([]string{a.addr}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees b alive again", wantState(a.Gossip, "b", Alive))
	if m, _ := stateOf(a.Gossip, "b"); m.Arch != "arm" {
		t.Fatalf("a has b's old metadata: %+v", m)
	}
}

// A member without the key cannot join or see anyone, and what it sends is
// dropped and counted.
func TestEncryptedOnly(t *testing.T) {
	a := start(t, "a", RoleServer, key(t, "s3cret"))
	b := start(t, "b", RoleAgent, key(t, "s3cret"))
	if _, err := b.Join([]string{a.addr}); err != nil {
		t.Fatal(err)
	}

	wrong := start(t, "wrong", RoleAgent, key(t, "not-the-secret"))
	if n, err := wrong.Join([]string{a.addr}); err == nil || n != 0 {
		t.Fatalf("a member with another key joined: %d, %v", n, err)
	}

	var logs bytes.Buffer
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr = "plain", "127.0.0.1", 0, "127.0.0.1"
	mc.LogOutput = &logs
	plain, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Shutdown()
	before := testutil.ToFloat64(a.metrics.undecryptable)
	if n, err := plain.Join([]string{a.addr}); err == nil || n != 0 {
		t.Fatalf("a plaintext member joined: %d, %v", n, err)
	}
	// The plaintext push-pull over TCP is counted on its own.
	eventually(t, "plaintext stream counted", func() error {
		if got := testutil.ToFloat64(a.metrics.undecryptable); got <= before {
			return fmt.Errorf("undecryptable %v, not more than %v", got, before)
		}
		return nil
	})
	// Plaintext probes over UDP too.
	conn, err := net.Dial("udp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("\x00plaintext ping"))
	conn.Close()

	eventually(t, "undecryptable traffic counted", func() error {
		var total float64
		mfs, _ := a.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "isle_gossip_undecryptable_total" {
				total = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if total < 2 {
			return fmt.Errorf("isle_gossip_undecryptable_total = %v, want >= 2", total)
		}
		return nil
	})
	if n := len(plain.Members()); n != 1 {
		t.Fatalf("the plaintext member sees %d members, want only itself", n)
	}
	for _, m := range a.Members() {
		if m.Name == "plain" || m.Name == "wrong" {
			t.Fatalf("a lists %s", m.Name)
		}
	}
	eventually(t, "probes counted as UDP bytes", func() error {
		if got := testutil.ToFloat64(wireBytes.WithLabelValues("sent", "udp")); got <= 0 {
			return fmt.Errorf("no UDP bytes counted as sent: %v", got)
		}
		return nil
	})
}

func TestConfigValidation(t *testing.T) {
	k := key(t, "x")
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no name", Config{Meta: Meta{Role: RoleAgent}, Addr: lo, Key: k}},
		{"bad role", Config{Meta: Meta{Name: "a", Role: "king"}, Addr: lo, Key: k}},
		{"no address", Config{Meta: Meta{Name: "a", Role: RoleAgent}, Key: k}},
		{"unspecified address", Config{Meta: Meta{Name: "a", Role: RoleAgent}, Addr: netip.IPv4Unspecified(), Key: k}},
		{"short key", Config{Meta: Meta{Name: "a", Role: RoleAgent}, Addr: lo, Key: k[:16]}},
		{"huge meta", Config{Meta: Meta{Name: "a", Role: RoleAgent, Version: string(make([]byte, 600))}, Addr: lo, Key: k}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if g, err := Start(tc.cfg); err == nil {
				g.Stop()
				t.Fatal("accepted")
			}
		})
	}
	if _, err := DeriveKey(""); err == nil {
		t.Fatal("empty secret accepted")
	}
	k2 := key(t, "x")
	if !bytes.Equal(k, k2) || bytes.Equal(k, key(t, "y")) {
		t.Fatal("DeriveKey is not a function of the secret")
	}
}

func TestDiscover(t *testing.T) {
	k := key(t, "s3cret")
	a := start(t, "a", RoleServer, k)
	b := start(t, "b", RoleAgent, k)
	if _, err := b.Join([]string{a.addr}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b sees a", wantState(b.Gossip, "a", Alive))
	got, err := Discover(lo, k, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[0].Role != RoleServer || got[1].Name != "b" {
		t.Fatalf("discovered %+v", got)
	}
	// The discovering member is never listed as a board.
	time.Sleep(300 * time.Millisecond)
	for _, m := range a.Members() {
		if m.Role != RoleServer && m.Role != RoleAgent {
			t.Fatalf("a lists %+v", m)
		}
	}
	if _, err := Discover(lo, key(t, "wrong"), []string{b.addr}); err == nil {
		t.Fatal("discovered with another token's key")
	}
}
