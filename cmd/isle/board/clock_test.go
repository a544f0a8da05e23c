package board

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

// timeServer is a server of ca that tells the time now() and takes in
// any board with the token's secret.
func timeServer(t *testing.T, ca *pki.CA, tok wire.Token, now func() time.Time) string {
	t.Helper()
	leaf, err := ca.ServingLeaf("s1", nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerConfig(ca, leaf)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.TimePath, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.TimeResponse{Time: now()})
	})
	mux.HandleFunc("POST "+wire.JoinPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+tok.Secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(wire.JoinResponse{CACert: ca.CertPEM(), NodeToken: "n.t"})
	})
	// Not httptest's TLS server: it adds a certificate of its own, which
	// wins over GetCertificate for clients that send no server name.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestSettleClock starts a board a year behind: it cannot check the
// server's certificate until it takes the cluster's time, which it says
// in one line and saves; a server telling an absurd time moves nothing.
func TestSettleClock(t *testing.T) {
	ca, err := pki.NewCA("cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	good := timeServer(t, ca, tok, time.Now)
	absurd := timeServer(t, ca, tok, func() time.Time { return time.Now().AddDate(30, 0, 0) })
	join := func(clk *clock.Clock, addr string) error {
		_, err := bootstrap.NewClient(tok, clk.Now).Join(context.Background(), []string{addr}, wire.JoinRequest{Name: "pi", Role: wire.RoleAgent}, "")
		return err
	}
	board := func() (Config, *bytes.Buffer) {
		var buf bytes.Buffer
		return Config{DataDir: t.TempDir(), Clock: clock.Shifted(-365 * 24 * time.Hour), Logger: slog.New(slog.NewTextHandler(&buf, nil))}, &buf
	}

	t.Run("a year behind", func(t *testing.T) {
		cfg, log := board()
		if err := join(cfg.Clock, good); !errors.Is(err, wire.ErrClock) {
			t.Fatalf("join a year behind: %v, want %v", err, wire.ErrClock)
		}
		settleClock(context.Background(), cfg, tok.CAHash, []string{good})
		if d := time.Since(cfg.Clock.Now()).Abs(); d > time.Second {
			t.Fatalf("after settling the clock is %v off", d)
		}
		if err := join(cfg.Clock, good); err != nil {
			t.Fatalf("join after settling: %v", err)
		}
		want := "clock: system time " + time.Now().AddDate(-1, 0, 0).UTC().Format("2006-01-02T") // the day a year ago
		if got := log.String(); !strings.Contains(got, want) || !strings.Contains(got, "is behind the cluster's "+time.Now().UTC().Format("2006-01-02T")) ||
			!strings.Contains(got, "server="+good) || strings.Count(got, "\n") != 1 {
			t.Fatalf("log:\n%s\nwant one line with %q", got, want)
		}
		b, err := os.ReadFile(filepath.Join(cfg.DataDir, clock.File))
		if err != nil {
			t.Fatal(err)
		}
		if saved, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err != nil || time.Since(saved).Abs() > 5*time.Second {
			t.Fatalf("saved time %q (%v), want now", b, err)
		}
	})
	t.Run("an absurd time is refused", func(t *testing.T) {
		cfg, log := board()
		before := cfg.Clock.Now()
		settleClock(context.Background(), cfg, tok.CAHash, []string{absurd})
		if d := cfg.Clock.Now().Sub(before); d > time.Second {
			t.Fatalf("the clock moved %v on an absurd server's word", d)
		}
		if got := log.String(); !strings.Contains(got, "refused") || strings.Contains(got, "clock: system time") {
			t.Fatalf("log:\n%s\nwant the refusal and no correction", got)
		}
		if err := join(cfg.Clock, absurd); !errors.Is(err, wire.ErrClock) {
			t.Fatalf("join: %v, want %v", err, wire.ErrClock)
		}
	})
}

// TestAskTimeUntilTold: a board that found no server at its start (the
// whole cluster lost power, and it came up first) takes the servers' time
// once one shows up in its gossip, and then stops asking.
func TestAskTimeUntilTold(t *testing.T) {
	ca, err := pki.NewCA("cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	api := timeServer(t, ca, tok, time.Now)
	server, agent := netip.MustParseAddr("127.87.0.5"), netip.MustParseAddr("127.87.0.6")
	start := gossipMetaStarter(t)
	a := start(gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, agent)

	var log bytes.Buffer
	cfg := Config{DataDir: t.TempDir(), Clock: clock.Shifted(-365 * 24 * time.Hour), Logger: slog.New(slog.NewTextHandler(&log, nil))}
	done := make(chan struct{})
	go func() {
		defer close(done)
		askTimeUntilTold(t.Context(), cfg, tok.CAHash, a, "", 20*time.Millisecond)
	}()
	// Alone, it asks nobody: its clock stays where it was.
	time.Sleep(200 * time.Millisecond)
	if d := time.Since(cfg.Clock.Now()); d < 364*24*time.Hour {
		t.Fatalf("with no server, the clock moved: %v behind", d)
	}
	s := start(gossip.Meta{Name: "s1", Role: gossip.RoleServer, API: api}, server)
	if _, err := s.Join([]string{netip.AddrPortFrom(agent, gossip.DefaultPort).String()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still asking 10 s after a server showed up")
	}
	if d := time.Since(cfg.Clock.Now()).Abs(); d > time.Second {
		t.Fatalf("after the server told its time the clock is %v off", d)
	}
	if !strings.Contains(log.String(), "is behind the cluster's") || !strings.Contains(log.String(), "server="+api) {
		t.Fatalf("log:\n%s", log.String())
	}
}
