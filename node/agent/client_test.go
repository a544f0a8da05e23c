package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
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

// lines is an slog handler's output, line by line.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

// listenOn serves TCP on addr ("127.0.0.1:0" for any port), closing what it
// accepts.
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// An outage logs one line when the servers are lost and one when a server
// answers again, however often the board dials meanwhile; a dial its caller
// gave up on logs nothing.
func TestServersLogStateChanges(t *testing.T) {
	key, _ := gossip.DeriveKey("s3cret")
	lonely, _ := startMember(t, gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, key)
	up := listenOn(t, "127.0.0.1:0")
	addr := up.Addr().String()
	var out lines
	s := &servers{g: lonely, fallback: []string{addr}, log: slog.New(slog.NewTextHandler(&out, nil))}
	dial := func(ctx context.Context) error {
		c, err := s.dial(ctx, "tcp", "x:1")
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(context.Background()); err != nil {
		t.Fatal(err)
	}
	up.Close()
	for range 5 {
		err := dial(context.Background())
		if !errors.Is(err, ErrNoAPIServer) || !Unreachable(err) {
			t.Fatalf("dial with the server gone: %v, want ErrNoAPIServer", err)
		}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_ = dial(canceled)
	defer listenOn(t, addr).Close()
	for range 3 {
		if err := dial(context.Background()); err != nil {
			t.Fatalf("dial with the server back: %v", err)
		}
	}
	got := out.get()
	if len(got) != 2 || !strings.Contains(got[0], `level=WARN msg="agent: lost the API servers`) ||
		!strings.Contains(got[0], "connection refused") ||
		!strings.Contains(got[1], `level=INFO msg="agent: an API server answers again" server=`+addr) {
		t.Fatalf("log of an outage:\n%s", strings.Join(got, "\n"))
	}
	// No server known at all is an outage too, logged once.
	out.buf.Reset()
	s = &servers{g: lonely, log: slog.New(slog.NewTextHandler(&out, nil))}
	for range 3 {
		if err := dial(context.Background()); !errors.Is(err, ErrNoAPIServer) {
			t.Fatalf("dial with no server known: %v", err)
		}
	}
	if got := out.get(); len(got) != 1 || !strings.Contains(got[0], `msg="agent: no API server answers yet`) || !strings.Contains(got[0], "none known yet") {
		t.Fatalf("log with no server known:\n%s", strings.Join(got, "\n"))
	}
}

// client-go keeps the dial's error in the chain of its own: what its
// informers log of an outage is recognized (Unreachable), and routed to
// debug level by cmd/isle.
func TestUnreachableThroughClientGo(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	srv.Close()
	key, _ := gossip.DeriveKey("s3cret")
	lonely, _ := startMember(t, gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, key)
	s := &servers{g: lonely, fallback: []string{srv.Listener.Addr().String()}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := newClient(wire.Credential{Name: "a1", NodeToken: "t", CACert: ca}, s)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Get().Resource("nodes").Do(context.Background()).Error()
	if !errors.Is(err, ErrNoAPIServer) || !Unreachable(err) {
		t.Fatalf("a request with no server up: %v (%T), want one wrapping ErrNoAPIServer", err, err)
	}
	if Unreachable(errors.New("nodes is forbidden")) || Unreachable(nil) {
		t.Fatal("an API error taken for an unreachable server")
	}
}

// The API clients speak HTTP/2 (net/http's client) to the servers, with
// the node's token and user agent, verifying the server by the CAs the
// board trusts.
func TestClientHTTP2(t *testing.T) {
	ca, err := pki.NewCA("test-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing(wire.APIServerName, []string{wire.APIServerName}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ proto, auth, agent string }
	got := make(chan seen, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Proto, r.Header.Get("Authorization"), r.Header.Get("User-Agent")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"a1"}}`)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	trust, err := newCATrust(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := gossip.DeriveKey("s3cret")
	lonely, _ := startMember(t, gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, key)
	s := &servers{g: lonely, fallback: []string{srv.Listener.Addr().String()}, trust: trust,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := newClient(wire.Credential{Name: "a1", NodeToken: "t0k"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get().Resource("nodes").Name("a1").Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g.proto != "HTTP/2.0" || g.auth != "Bearer t0k" || g.agent != "isle-agent/a1" {
		t.Fatalf("the server saw %+v, want HTTP/2.0, Bearer t0k, isle-agent/a1", g)
	}
}

// The HTTP/2 health check of the API clients is client-go's, and its
// environment variables change it as they change client-go's.
func TestTransportHTTP2Settings(t *testing.T) {
	tr := newTransport(&servers{})
	if !tr.ForceAttemptHTTP2 || tr.HTTP2 == nil || tr.HTTP2.SendPingTimeout != 30*time.Second || tr.HTTP2.PingTimeout != 15*time.Second {
		t.Fatalf("transport: HTTP/2 %v, %+v; want HTTP/2 with pings after 30 s of silence, 15 s to answer", tr.ForceAttemptHTTP2, tr.HTTP2)
	}
	if tr.TLSHandshakeTimeout != 10*time.Second || tr.IdleConnTimeout != 90*time.Second || tr.MaxIdleConnsPerHost != 25 || tr.Proxy == nil {
		t.Fatalf("transport: %v handshake, %v idle, %d idle per host, proxy %v; want client-go's defaults", tr.TLSHandshakeTimeout, tr.IdleConnTimeout, tr.MaxIdleConnsPerHost, tr.Proxy != nil)
	}
	t.Setenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "0")
	t.Setenv("HTTP2_PING_TIMEOUT_SECONDS", "5")
	if tr := newTransport(&servers{}); tr.HTTP2.SendPingTimeout != 0 || tr.HTTP2.PingTimeout != 5*time.Second {
		t.Fatalf("health check %+v, want none (HTTP2_READ_IDLE_TIMEOUT_SECONDS=0), 5 s", tr.HTTP2)
	}
	t.Setenv("DISABLE_HTTP2", "1")
	if tr := newTransport(&servers{}); tr.ForceAttemptHTTP2 || tr.HTTP2 != nil {
		t.Fatal("DISABLE_HTTP2 set: the transport still asks for HTTP/2")
	}
}
