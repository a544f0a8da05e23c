package bootstrap

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
)

// server is a TLS server with a certificate of ca answering the join.
func server(t *testing.T, ca *pki.CA, h http.HandlerFunc) string {
	t.Helper()
	leaf, err := ca.ServingLeaf("s", nil, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerConfig(ca, leaf)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := cfg.GetCertificate(nil)
	cfg.Certificates = []tls.Certificate{*pair} // or StartTLS adds httptest's own
	s := httptest.NewUnstartedServer(h)
	s.TLS = cfg
	s.StartTLS()
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "https://")
}

func TestJoin(t *testing.T) {
	ca, err := pki.NewCA("cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	answer := func(code int, body any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			asked = append(asked, r.Host)
			if r.Header.Get("Authorization") != "Bearer "+tok.Secret || r.URL.Path != wire.JoinPath {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			var req wire.JoinRequest
			if json.NewDecoder(r.Body).Decode(&req) != nil || req.Name != "pi" || req.Role != wire.RoleAgent || r.Header.Get(wire.CredentialHeader) != "old" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(body)
		}
	}
	good := server(t, ca, answer(200, wire.JoinResponse{CACert: ca.CertPEM(), NodeToken: "n.t"}))
	down := server(t, ca, answer(503, map[string]string{"error": "no leader"}))
	taken := server(t, ca, answer(409, map[string]string{"error": "a board named \"pi\" is already in the cluster"}))
	liar := server(t, ca, answer(200, wire.JoinResponse{CACert: other.CertPEM()}))
	stranger := server(t, other, answer(200, wire.JoinResponse{CACert: other.CertPEM()}))

	req := wire.JoinRequest{Name: "pi", Role: wire.RoleAgent}
	c := NewClient(tok, nil)
	ctx := context.Background()
	cases := []struct {
		name    string
		addrs   []string
		want    string // error substring; "" for success
		refused bool
		asked   int
	}{
		{"first answers", []string{good, down}, "", false, 1},
		{"the next server after one without a leader", []string{down, good}, "", false, 2},
		{"a refusal is final", []string{taken, good}, "already in the cluster", true, 1},
		{"a CA that is not the token's", []string{liar}, "not the token's", false, 1},
		{"another cluster's server", []string{stranger}, "not a server of the cluster this token belongs to", false, 0},
		{"nobody", nil, "no server known", false, 0},
	}
	for _, tc := range cases {
		asked = nil
		resp, err := c.Join(ctx, tc.addrs, req, "old")
		switch {
		case tc.want == "" && (err != nil || resp.NodeToken != "n.t"):
			t.Errorf("%s: %+v, %v", tc.name, resp, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		var refused *Refused
		if errors.As(err, &refused) != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.name, errors.As(err, &refused), tc.refused)
		}
		if len(asked) != tc.asked {
			t.Errorf("%s: %d servers asked, want %d", tc.name, len(asked), tc.asked)
		}
	}
}

func TestAPIAddrs(t *testing.T) {
	ms := []gossip.Member{
		{Meta: gossip.Meta{Name: "s1", Role: gossip.RoleServer, API: "10.0.0.1:6443"}, State: gossip.Alive},
		{Meta: gossip.Meta{Name: "s2", Role: gossip.RoleServer, API: "10.0.0.2:6443"}, State: gossip.Dead},
		{Meta: gossip.Meta{Name: "s3", Role: gossip.RoleServer, API: "10.0.0.3:6443"}, State: gossip.Suspect},
		{Meta: gossip.Meta{Name: "a1", Role: gossip.RoleAgent}, State: gossip.Alive},
	}
	if got := strings.Join(APIAddrs(ms), ","); got != "10.0.0.1:6443,10.0.0.3:6443" {
		t.Fatalf("APIAddrs: %s", got)
	}
}

func TestServerTime(t *testing.T) {
	ca, err := pki.NewCA("cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hash := wire.CAHash(ca.Cert())
	tells := func(at func() time.Time) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != wire.TimePath || r.Method != http.MethodGet {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(wire.TimeResponse{Time: at()})
		}
	}
	good := server(t, ca, tells(time.Now))
	// A server's certificate is valid for pki.LeafValidity from now (less
	// pki.ClockSkew): a time beyond it, or before it, is not the
	// cluster's.
	future := server(t, ca, tells(func() time.Time { return time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) }))
	past := server(t, ca, tells(func() time.Time { return time.Now().AddDate(-1, 0, 0) }))
	stranger := server(t, other, tells(time.Now))
	old := server(t, ca, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })

	ctx := context.Background()
	cases := []struct {
		name  string
		addrs []string
		floor time.Time
		want  string // error substring; "" for success
	}{
		{"the cluster's time", []string{good}, time.Time{}, ""},
		{"past a liar to a good server", []string{future, good}, time.Time{}, ""},
		{"far in the future", []string{future}, time.Time{}, "server time 2099-01-01T00:00:00Z refused"},
		{"before the server's certificate", []string{past}, time.Time{}, "refused"},
		{"another cluster's server", []string{stranger}, time.Time{}, "no CA certificate with hash"},
		{"a server without the time", []string{old}, time.Time{}, "HTTP 401"},
		{"a certificate that lapsed before isle's build", []string{good}, time.Now().AddDate(2, 0, 0), "not valid at any time after isle's build"},
		{"nobody", nil, time.Time{}, "no server known"},
	}
	for _, tc := range cases {
		r, err := ServerTime(ctx, hash, tc.addrs, tc.floor)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (r.Now().Sub(time.Now()).Abs() > time.Second || r.Server != good || r.Source != "the cluster's"):
			t.Errorf("%s: %+v, want the time now from %s", tc.name, r, good)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %+v, %v, want an error with %q", tc.name, r, err, tc.want)
		}
	}
}
