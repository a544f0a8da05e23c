package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// clock is an injected clock tests move by hand.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.set(t)
	return c
}
func (c *clock) now() time.Time  { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

func TestRenewalWait(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	year := &x509.Certificate{NotBefore: start, NotAfter: start.Add(365 * 24 * time.Hour)}
	minute := &x509.Certificate{NotBefore: start, NotAfter: start.Add(100 * time.Second)}
	tests := []struct {
		name string
		cert *x509.Certificate
		at   time.Duration // after NotBefore
		want time.Duration
	}{
		{"a year's, fresh: an hour", year, 0, time.Hour},
		{"a year's, a minute before due", year, time.Duration(0.6*float64(365*24*time.Hour)) - time.Minute, time.Minute},
		{"a year's, due: a minute", year, 300 * 24 * time.Hour, time.Minute},
		{"short, fresh: until due", minute, 0, 60 * time.Second},
		{"short, due: a fiftieth, at least a second", minute, 70 * time.Second, 2 * time.Second},
	}
	for _, tc := range tests {
		if got := wire.RenewalWait(tc.cert, start.Add(tc.at)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLeafRenewal(t *testing.T) {
	ca := mustCA(t, "isle")
	ca.LeafValidity = 10 * time.Hour
	clk := newClock(testNow)
	leaf, err := ca.ClientLeaf(wire.APIServerUser, []string{"g"}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	var issued [][]byte
	leaf.OnIssue(func(certPEM []byte) { issued = append(issued, certPEM) })
	first, _ := leaf.Get()
	if v := first.Leaf.NotAfter.Sub(first.Leaf.NotBefore); v != 11*time.Hour {
		t.Fatalf("validity %v, want 10h and the 1h backdating", v)
	}
	if len(issued) != 1 || mustParseCert(t, issued[0]).SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("OnIssue got %d certificates, want the current one", len(issued))
	}
	// NotBefore is an hour back: due at 0.6 × 11h = 6.6h after it.
	clk.set(testNow.Add(5*time.Hour + 30*time.Minute))
	if c, _ := leaf.Get(); c != first {
		t.Fatal("renewed before three fifths of its life")
	}
	clk.set(testNow.Add(5*time.Hour + 40*time.Minute))
	second, err := leaf.Get()
	if err != nil || second == first || !second.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Fatalf("at three fifths of its life: %v, %v; want a new certificate", second, err)
	}
	if second.Leaf.NotAfter.Sub(clk.now()) < 9*time.Hour || leaf.Current() != second.Leaf || len(issued) != 2 {
		t.Fatalf("renewed: expires %v, Current %v, %d issued; want 10h from now, the new one, 2",
			second.Leaf.NotAfter, leaf.Current().SerialNumber, len(issued))
	}
	// LeafValidity 0: the constant's year.
	ca.LeafValidity = 0
	clk.set(testNow.Add(12 * time.Hour))
	if third, _ := leaf.Get(); third.Leaf.NotAfter.Sub(third.Leaf.NotBefore) != LeafValidity+ClockSkew {
		t.Fatalf("LeafValidity 0: valid %v, want a year", third.Leaf.NotAfter.Sub(third.Leaf.NotBefore))
	}
}

func TestLeafFailedRenewal(t *testing.T) {
	ca := mustCA(t, "isle")
	clk := newClock(testNow)
	leaf, err := ca.ServingLeaf("s1", nil, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := leaf.Get()
	// The CA cannot issue (its key is gone): the current certificate is
	// kept while valid, an error once expired.
	ca.Signer().Key = nil
	clk.set(testNow.Add(300 * 24 * time.Hour))
	if c, err := leaf.Get(); err != nil || c != first {
		t.Fatalf("renewal failed, certificate valid: %v, %v; want the current one", c, err)
	}
	clk.set(first.Leaf.NotAfter.Add(time.Second))
	if c, err := leaf.Get(); err == nil || !strings.Contains(err.Error(), "pki: serving certificate s1: ") {
		t.Fatalf("renewal failed, certificate expired: %v, %v; want an error naming it", c, err)
	}
}

// TestLeafRun has Run renew a two-second certificate by the real clock,
// with no handshake asking, before two thirds of its life.
func TestLeafRun(t *testing.T) {
	ca := mustCA(t, "isle")
	ca.LeafValidity = 2 * time.Second
	leaf, err := ca.ServingLeaf("s1", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var renewedAt []time.Time
	leaf.OnIssue(func([]byte) {
		mu.Lock()
		defer mu.Unlock()
		renewedAt = append(renewedAt, time.Now())
	})
	first := leaf.Current()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaf.Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for leaf.Current() == first {
		if time.Now().After(deadline) {
			t.Fatal("not renewed in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	at := renewedAt[1]
	mu.Unlock()
	life := first.NotAfter.Sub(first.NotBefore)
	if limit := first.NotBefore.Add(life * 2 / 3); at.After(limit) {
		t.Fatalf("renewed at %v, after two thirds of its life (%v)", at, limit)
	}
}

// TestServerConfigRenews serves a Leaf whose renewal comes due: a
// connection made before goes on, the next handshake gets the new
// certificate, with the CA after it, and a ClientConfig's client
// certificate is renewed the same way.
func TestServerConfigRenews(t *testing.T) {
	ca := mustCA(t, "isle")
	ca.LeafValidity = time.Hour
	// Handshakes check dates by the real clock: the first certificates
	// are issued 45 minutes back, renewed by now.
	clk := newClock(testNow.Add(-45 * time.Minute))
	serving, err := ca.ServingLeaf("isle-apiserver", []string{"isle-1.local"}, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg, err := ServerConfig(ca, serving)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg.ClientAuth = tls.RequireAndVerifyClientCert
	srv := startTLSServer(t, srvCfg)
	client, err := ca.ClientLeaf(wire.APIServerUser, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClientConfig(ca, client)
	cfg.ServerName = "isle-1.local"
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	fetch := func(tr *http.Transport) (serving, clientCN string) {
		t.Helper()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if n := len(resp.TLS.PeerCertificates); n != 2 || !resp.TLS.PeerCertificates[1].Equal(ca.Cert()) {
			t.Fatalf("%d certificates served, want the leaf then the CA", n)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String(), string(body)
	}
	before, who := fetch(tr)
	if who != "CN="+wire.APIServerUser+";O=" {
		t.Fatalf("server saw %q", who)
	}
	oldClient := client.Current()

	clk.set(testNow)
	if again, _ := fetch(tr); again != before {
		t.Fatal("the open connection changed certificates")
	}
	fresh := &http.Transport{TLSClientConfig: cfg}
	defer fresh.CloseIdleConnections()
	if after, _ := fetch(fresh); after == before {
		t.Fatal("a new connection after the renewal was due got the old serving certificate")
	}
	if client.Current() == oldClient {
		t.Fatal("the client certificate was not renewed at the new handshake")
	}
}

func TestState(t *testing.T) {
	ca := mustCA(t, "isle") // ten years from testNow
	leaf := mustParseCert(t, first(mustServing(t, ca)))
	tests := []struct {
		name string
		cert *x509.Certificate
		at   time.Time
		want string
	}{
		{"fresh CA", ca.Cert(), testNow, StateOK},
		{"CA a year and a day before its end", ca.Cert(), ca.Cert().NotAfter.Add(-366 * 24 * time.Hour), StateOK},
		{"CA within a year of its end", ca.Cert(), ca.Cert().NotAfter.Add(-364 * 24 * time.Hour), StateRenewSoon},
		{"CA expired", ca.Cert(), ca.Cert().NotAfter, StateExpired},
		{"clock far behind", ca.Cert(), testNow.Add(-2 * time.Hour), StateNotYetValid},
		{"fresh leaf", leaf, testNow, StateOK},
		{"leaf due", leaf, wire.RenewAt(leaf), StateRenewSoon},
		{"leaf expired", leaf, leaf.NotAfter.Add(time.Second), StateExpired},
	}
	for _, tc := range tests {
		if got := State(tc.cert, tc.at); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func first(a, _ []byte) []byte { return a }
