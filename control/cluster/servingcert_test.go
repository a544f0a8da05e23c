package cluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
)

func TestServingCertHandler(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	node := c.Node(c.IDs()[0])
	tokens := map[string]string{}
	for _, name := range []string{"pi2", "kubernetes", "api.lan"} {
		tok, err := issueNodeToken(t.Context(), node, name)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok
	}
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := &servingCertHandler{
		ca:     ca,
		nodeOf: func(token string) (string, bool) { return nodeOfToken(node.KV(), token) },
		members: func() []raft.Member {
			return []raft.Member{{Name: "pi1", ClientAddr: "api.lan:6443"}, {Name: "pi2", ClientAddr: "pi2:6443"}}
		},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC) },
	}
	// The join handler behind the same mux wants the cluster token.
	srv := httptest.NewServer(isleHandler(h, &joinHandler{id: Identity{Token: wire.Token{Secret: "cluster-secret"}}, log: h.log,
		tokens: &tokenKeeper{node: node, ca: ca, now: time.Now, log: h.log}}))
	t.Cleanup(srv.Close)

	// The request names another node: the certificate is the token's.
	csr, _, err := wire.NewCSR("pi9")
	if err != nil {
		t.Fatal(err)
	}
	post := func(method, token string, body []byte) (int, string) {
		t.Helper()
		r, err := http.NewRequestWithContext(t.Context(), method, srv.URL+wire.ServingCertPath, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, method, token string
		body                []byte
		code                int
		want                string
	}{
		{"no token", "POST", "", csr, 401, "node credential"},
		{"wrong token", "POST", tokens["pi2"][:7] + strings.Repeat("x", 32), csr, 401, "node credential"},
		{"the cluster token", "POST", "cluster-secret", csr, 401, "node credential"},
		{"GET", "GET", tokens["pi2"], nil, 405, "want POST"},
		{"not a request", "POST", tokens["pi2"], []byte("hello"), 400, "no PEM block"},
		{"too large", "POST", tokens["pi2"], []byte(strings.Repeat("a", maxCSRBytes+1)), 413, "over"},
		{"reserved name", "POST", tokens["kubernetes"], csr, 403, "API server certificates carry"},
		{"a server's API host", "POST", tokens["api.lan"], csr, 403, "server pi1's API is reached at that name"},
		{"issued", "POST", tokens["pi2"], csr, 200, "-----BEGIN CERTIFICATE-----"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.method, tc.token, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %q, want %d with %q", code, body, tc.code, tc.want)
			}
			if code != 200 {
				return
			}
			block, _ := pem.Decode([]byte(body))
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "pi2", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Fatalf("not the CA's serving certificate for pi2: %v", err)
			}
			if len(cert.DNSNames) != 1 || len(cert.IPAddresses) != 0 {
				t.Fatalf("names %v %v, want pi2 only", cert.DNSNames, cert.IPAddresses)
			}
		})
	}

	// The server's time is told to anyone: a board with no credential yet
	// checks it against the server's certificate (wire.CheckServerTime).
	resp, err := srv.Client().Get(srv.URL + wire.TimePath)
	if err != nil {
		t.Fatal(err)
	}
	var told wire.TimeResponse
	err = json.NewDecoder(resp.Body).Decode(&told)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !told.Time.Equal(h.now()) {
		t.Fatalf("time: %d %v %v, want 200 and %v", resp.StatusCode, told.Time, err, h.now())
	}

	// The rest of /isle/ is still the join handler's, behind the cluster token.
	r, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/isle/v1/members", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+tokens["pi2"])
	resp, err = srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("members with a node credential: %d, want 401", resp.StatusCode)
	}
}
