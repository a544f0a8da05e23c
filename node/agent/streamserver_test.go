package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
)

// certIssuer is a server's wire.ServingCertPath: it issues certificates of its
// CA for the node a token belongs to.
type certIssuer struct {
	ca     *pki.CA
	tokens map[string]string // token → node
	srv    *httptest.Server

	mu       sync.Mutex
	requests int
	issueAs  string // if set, the name put in certificates (a faulty server)
}

func newCertIssuer(t *testing.T, ca *pki.CA, tokens map[string]string) *certIssuer {
	t.Helper()
	ci := &certIssuer{ca: ca, tokens: tokens}
	leaf, err := ca.ServingLeaf("server", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerConfig(ca, leaf)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := cfg.GetCertificate(nil)
	cfg.Certificates = []tls.Certificate{*pair} // or StartTLS adds httptest's own
	ci.srv = httptest.NewUnstartedServer(ci)
	ci.srv.TLS = cfg
	ci.srv.StartTLS()
	t.Cleanup(ci.srv.Close)
	return ci
}

func (ci *certIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	ci.requests++
	node, ok := ci.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if r.Method != http.MethodPost || r.URL.Path != wire.ServingCertPath || !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "not a node credential"})
		return
	}
	if ci.issueAs != "" {
		node = ci.issueAs
	}
	csr, _ := io.ReadAll(r.Body)
	cert, err := ci.ca.IssueNodeServing(node, csr, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = w.Write(cert)
}

func (ci *certIssuer) count() int {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return ci.requests
}

func (ci *certIssuer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, ci.srv.Listener.Addr().String())
}

// streamTestHandler answers every request with "streams".
var streamTestHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "streams") })

func testStreamServer(t *testing.T, ci *certIssuer, dir, token string) *streamServer {
	t.Helper()
	cfg := Config{
		Credential: wire.Credential{Name: "pi2", NodeToken: token, CACert: ci.ca.CertPEM(), GossipKey: make([]byte, 32)},
		Address:    "127.0.0.1", DataDir: dir, Stream: streamTestHandler, // StreamPort 0: any free port
	}
	trust, err := newCATrust(cfg.Credential.CACert)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStreamServer(cfg, trust, ci.dial, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs s until the test ends, or until the returned stop is called.
func (s *streamServer) start(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("streaming server: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// apiServerTLS is the API servers' client configuration for node name.
func apiServerTLS(t *testing.T, ca *pki.CA, name string) *tls.Config {
	t.Helper()
	leaf, err := ca.ClientLeaf(wire.APIServerUser, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pki.ClientConfig(ca, leaf)
	cfg.ServerName = name
	return cfg
}

// fetch GETs https://addr/ with cfg, returning the body and the serial of
// the server's certificate.
func fetch(addr string, cfg *tls.Config) (body, serial string, err error) {
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.TLS.PeerCertificates[0].SerialNumber.String(), err
}

func streamEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamTLSConfig(t *testing.T) {
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	csr, key, err := wire.NewCSR("pi2")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueNodeServing("pi2", csr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := StreamTLSConfig(ca.Pool, func() *tls.Certificate { return &pair })
	srv := httptest.NewUnstartedServer(streamTestHandler)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	withCert := func(ca *pki.CA, cn string, orgs ...string) *tls.Config {
		c, k, err := ca.IssueClient(cn, orgs, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{RootCAs: ca.Pool(), ServerName: "pi2", Certificates: []tls.Certificate{p}}
	}
	tests := []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"the API servers", apiServerTLS(t, ca, "pi2"), true},
		{"no client certificate", &tls.Config{RootCAs: ca.Pool(), ServerName: "pi2"}, false},
		{"the administrator", withCert(ca, "isle-admin", "system:masters"), false},
		{"another node", withCert(ca, "system:node:pi3", "system:nodes"), false},
		{"the API servers' name from another CA", withCert(other, wire.APIServerUser), false},
		{"expecting another node", apiServerTLS(t, ca, "pi3"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, _, err := fetch(addr, tc.cfg)
			if tc.ok && (err != nil || body != "streams") {
				t.Fatalf("refused: %q, %v", body, err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("served: %q", body)
			}
		})
	}
}

func TestStreamServerCertificate(t *testing.T) {
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ci := newCertIssuer(t, ca, map[string]string{"tok.pi2": "pi2"})
	dir := t.TempDir()
	path := filepath.Join(dir, ServingCertFile)
	client := apiServerTLS(t, ca, "pi2")

	// First start: a certificate from the servers, saved.
	s := testStreamServer(t, ci, dir, "tok.pi2")
	stop := s.start(t)
	var serial string
	streamEventually(t, "served", func() bool {
		body, sn, err := fetch(s.lis.Addr().String(), client)
		serial = sn
		return err == nil && body == "streams"
	})
	if ci.count() != 1 {
		t.Fatalf("%d certificate requests, want 1", ci.count())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v; want mode 0600", path, fi, err)
	}
	saved, _ := os.ReadFile(path)
	stop()

	// Restart: the saved certificate, no request, no write.
	s = testStreamServer(t, ci, dir, "tok.pi2")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	s.now = func() time.Time { return time.Unix(0, now.Load()) }
	s.check = 10 * time.Millisecond
	s.start(t)
	streamEventually(t, "served after a restart", func() bool {
		body, sn, err := fetch(s.lis.Addr().String(), client)
		return err == nil && body == "streams" && sn == serial
	})
	if again, _ := os.ReadFile(path); ci.count() != 1 || string(again) != string(saved) {
		t.Fatalf("after a restart: %d requests (want 1), file rewritten: %v", ci.count(), string(again) != string(saved))
	}

	// Two thirds of its year later: renewed while serving.
	now.Store(time.Now().Add(250 * 24 * time.Hour).UnixNano())
	streamEventually(t, "renewed", func() bool {
		_, sn, err := fetch(s.lis.Addr().String(), client)
		return err == nil && sn != serial
	})
	// The issuer dates certificates by the real clock, the board's is
	// 250 days ahead: each new certificate is due again at once, so more
	// than one renewal may happen before this check.
	if again, _ := os.ReadFile(path); ci.count() < 2 || string(again) == string(saved) {
		t.Fatalf("after renewal: %d requests (want 2 or more), file rewritten: %v", ci.count(), string(again) != string(saved))
	}
}

func TestStreamServerCertificateRefused(t *testing.T) {
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ci := newCertIssuer(t, ca, map[string]string{"tok.pi2": "pi2"})

	t.Run("wrong token", func(t *testing.T) {
		s := testStreamServer(t, ci, t.TempDir(), "tok.wrong")
		defer s.lis.Close()
		if _, err := s.obtain(t.Context()); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "not a node credential") {
			t.Fatalf("error %v, want the server's 401 and its reason", err)
		}
	})
	t.Run("certificate for another node", func(t *testing.T) {
		ci.mu.Lock()
		ci.issueAs = "pi3"
		ci.mu.Unlock()
		defer func() { ci.mu.Lock(); ci.issueAs = ""; ci.mu.Unlock() }()
		dir := t.TempDir()
		s := testStreamServer(t, ci, dir, "tok.pi2")
		defer s.lis.Close()
		if _, err := s.obtain(t.Context()); err == nil || !strings.Contains(err.Error(), "pi2") {
			t.Fatalf("error %v, want a refusal of a certificate not for pi2", err)
		}
		if _, err := os.Stat(filepath.Join(dir, ServingCertFile)); err == nil {
			t.Fatal("a certificate for another node was saved")
		}
	})
	t.Run("saved certificate of another CA replaced", func(t *testing.T) {
		dir := t.TempDir()
		csr, key, err := wire.NewCSR("pi2")
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := other.IssueNodeServing("pi2", csr, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, ServingCertFile)
		if err := os.WriteFile(path, append(foreign, key...), 0o600); err != nil {
			t.Fatal(err)
		}
		before := ci.count()
		s := testStreamServer(t, ci, dir, "tok.pi2")
		s.start(t)
		streamEventually(t, "served", func() bool {
			body, _, err := fetch(s.lis.Addr().String(), apiServerTLS(t, ca, "pi2"))
			return err == nil && body == "streams"
		})
		if saved, _ := os.ReadFile(path); ci.count() != before+1 || strings.Contains(string(saved), string(foreign)) {
			t.Fatalf("%d new requests (want 1); the foreign certificate still saved: %v", ci.count()-before, strings.Contains(string(saved), string(foreign)))
		}
	})
}

func TestStreamDefaults(t *testing.T) {
	tests := []struct {
		name         string
		stream       http.Handler
		port, want   int
		wantErrorFor string
	}{
		{"no stream", nil, 1234, 0, ""},
		{"default port", streamTestHandler, 0, DefaultStreamPort, ""},
		{"port", streamTestHandler, 11250, 11250, ""},
		{"negative", streamTestHandler, -1, 0, "StreamPort -1"},
		{"too large", streamTestHandler, 70000, 0, "StreamPort 70000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Stream: tc.stream, StreamPort: tc.port}
			err := c.streamDefaults()
			if tc.wantErrorFor != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrorFor) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErrorFor)
				}
				return
			}
			if err != nil || c.StreamPort != tc.want {
				t.Fatalf("port %d, %v; want %d", c.StreamPort, err, tc.want)
			}
		})
	}
}

func TestApplyStatusDaemonEndpoints(t *testing.T) {
	n := &corev1.Node{}
	want := corev1.NodeStatus{DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}}
	if !applyStatus(n, want) || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Fatalf("the port is not posted: %+v", n.Status.DaemonEndpoints)
	}
	if applyStatus(n, want) {
		t.Fatal("the same port posted again")
	}
	want.DaemonEndpoints.KubeletEndpoint.Port = 11250
	if !applyStatus(n, want) || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 11250 {
		t.Fatalf("a new port is not posted: %+v", n.Status.DaemonEndpoints)
	}
}

// TestStreamServerShortLived serves with six-second certificates by the
// real clock: each is replaced before it expires while clients keep
// connecting, and the expiry metric follows the one served.
func TestStreamServerShortLived(t *testing.T) {
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Renewed at 60 %: 2.4 s before expiry leaves room for a new key and
	// a round trip under emulation.
	ca.LeafValidity = 6 * time.Second
	ci := newCertIssuer(t, ca, map[string]string{"tok.pi2": "pi2"})
	client := apiServerTLS(t, ca, "pi2")
	s := testStreamServer(t, ci, t.TempDir(), "tok.pi2")
	reg := prometheus.NewRegistry()
	s.reg = reg
	s.start(t)
	serials := map[string]bool{}
	deadline := time.Now().Add(14 * time.Second)
	for time.Now().Before(deadline) {
		body, sn, err := fetch(s.lis.Addr().String(), client)
		if err != nil && len(serials) > 0 {
			t.Fatalf("after %d certificates: %v", len(serials), err)
		}
		if err == nil && body == "streams" {
			serials[sn] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(serials) < 3 {
		t.Fatalf("%d certificates served in 14 s of 6 s certificates, want 3 or more", len(serials))
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != wire.CertExpiryMetric {
		t.Fatalf("metrics %v, %v; want %s alone", mfs, err, wire.CertExpiryMetric)
	}
	m := mfs[0].GetMetric()[0]
	if v := m.GetGauge().GetValue(); v <= 0 || v > 6 || m.GetLabel()[0].GetValue() != wire.CertKindNode {
		t.Fatalf("%s{%s} = %v, want in (0, 6]", wire.CertExpiryMetric, m.GetLabel(), v)
	}
}
