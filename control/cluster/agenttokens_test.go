package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/wire"
)

// noBoards is a gossip that knows no board.
type noBoards struct{}

func (noBoards) Boards() []nodelifecycle.Board { return nil }
func (noBoards) Changed() <-chan struct{}      { return nil }
func (noBoards) Members() []wire.MemberInfo    { return nil }
func (noBoards) Forget(string)                 {}

// TestAgentTokens checks what an agent token admits (an agent's join and
// nothing else), its expiry and revocation, and the admin API that makes
// them.
func TestAgentTokens(t *testing.T) {
	srv, _ := storeOfOne(t)
	id, err := NewIdentity(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := bytes.Repeat([]byte{7}, 32)
	tokens := &tokenKeeper{node: srv.node, ca: id.CA, gossipKey: key, now: clock, log: log}
	h := &joinHandler{node: srv.node, id: id, gossipKey: key, tokens: tokens, log: log, members: &membership{node: srv.node, boards: noBoards{}}}
	admin := tokens.handler(&serverTokens{node: srv.node, id: id, gossipKey: key, dataDir: t.TempDir(), log: log, now: clock})

	adminCall := func(method, path string) (int, []byte) {
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code, w.Body.Bytes()
	}
	create := func(query string) wire.Token {
		t.Helper()
		code, b := adminCall(http.MethodPost, TokensPath+query)
		var resp wire.NewTokenResponse
		if code != http.StatusCreated || json.Unmarshal(b, &resp) != nil {
			t.Fatalf("POST %s: %d %s", TokensPath+query, code, b)
		}
		tok, err := wire.ParseToken(resp.Token)
		if err != nil || !tok.IsAgent() || tok.CAHash != id.Token.CAHash || !bytes.Equal(tok.GossipKey, key) {
			t.Fatalf("the token made %q: %+v, %v", resp.Token, tok, err)
		}
		return tok
	}
	call := func(method, path, bearer, body string) (int, string) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	joinAs := func(bearer, name string, role wire.Role) (int, string) {
		body := `{"name":"` + name + `","role":"` + string(role) + `","release":"` + wire.Release + `"`
		if role == wire.RoleServer {
			body += `,"raftAddr":"127.0.0.1:1","apiAddr":"127.0.0.1:2"`
		}
		return call(http.MethodPost, wire.JoinPath, bearer, body+"}")
	}

	lab := create("?ttl=1h&description=lab+3")
	forever := create("")

	code, body := joinAs(lab.Bearer(), "pi7", wire.RoleAgent)
	var resp wire.JoinResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &resp) != nil || resp.NodeToken == "" || resp.CAKeySealed != nil || resp.Join != nil {
		t.Fatalf("an agent's join with an agent token: %d %s", code, body)
	}
	members := len(srv.node.Members())
	if code, body := joinAs(lab.Bearer(), "pi8", wire.RoleServer); code != http.StatusForbidden || !strings.Contains(body, "admits agents only") {
		t.Errorf("a server's join with an agent token: %d %s, want 403", code, body)
	}
	if n := len(srv.node.Members()); n != members {
		t.Errorf("the store has %d members after the refused join, want %d", n, members)
	}
	if _, found, _ := srv.node.KV().Get(nodeNamePrefix + "pi8"); found {
		t.Error("the refused server's name was claimed")
	}
	for _, req := range [][2]string{{http.MethodGet, membersPath}, {http.MethodDelete, membersPath + "/pi7"}} {
		if code, body := call(req[0], req[1], forever.Bearer(), ""); code != http.StatusForbidden || !strings.Contains(body, "needs the server token") {
			t.Errorf("%s %s with an agent token: %d %s, want 403", req[0], req[1], code, body)
		}
	}
	if code, body := call(http.MethodGet, membersPath, id.Token.Secret, ""); code != http.StatusOK {
		t.Errorf("GET %s with the server token: %d %s", membersPath, code, body)
	}

	// A wrong secret under a valid ID, an unknown ID, garbage: 401.
	for _, bearer := range []string{lab.ID + "." + strings.Repeat("a", 32), "zzzzzz." + lab.Secret, "", "a.b", id.Token.Secret + "x"} {
		if code, _ := joinAs(bearer, "pi9", wire.RoleAgent); code != http.StatusUnauthorized {
			t.Errorf("join with %q: %d, want 401", bearer, code)
		}
	}

	// Expiry, by the servers' clock.
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	if code, body := joinAs(lab.Bearer(), "pi9", wire.RoleAgent); code != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("join with an expired token: %d %s, want 401 naming the expiry", code, body)
	}
	if code, _ := joinAs(forever.Bearer(), "pi9", wire.RoleAgent); code != http.StatusOK {
		t.Errorf("join with a token without a ttl: %d", code)
	}

	// The list names both, without secrets.
	code, b := adminCall(http.MethodGet, TokensPath)
	var infos []wire.AgentTokenInfo
	if code != http.StatusOK || json.Unmarshal(b, &infos) != nil || len(infos) != 2 || bytes.Contains(b, []byte(lab.Secret)) {
		t.Fatalf("GET %s: %d %s", TokensPath, code, b)
	}
	byID := map[string]wire.AgentTokenInfo{infos[0].ID: infos[0], infos[1].ID: infos[1]}
	if l, f := byID[lab.ID], byID[forever.ID]; l.Description != "lab 3" || l.Expires.IsZero() || f.ID != forever.ID || !f.Expires.IsZero() {
		t.Errorf("the list: %+v", infos)
	}

	// Revocation.
	if code, b := adminCall(http.MethodDelete, TokensPath+"/"+forever.ID); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, b)
	}
	if code, _ := joinAs(forever.Bearer(), "pi10", wire.RoleAgent); code != http.StatusUnauthorized {
		t.Errorf("join with a revoked token: %d, want 401", code)
	}

	// Rotation revokes every agent token and makes one that works.
	other := create("")
	code, b = adminCall(http.MethodPost, TokensPath+"/rotate?kind=agent")
	var rot wire.NewTokenResponse
	if code != http.StatusOK || json.Unmarshal(b, &rot) != nil {
		t.Fatalf("rotate: %d %s", code, b)
	}
	fresh, err := wire.ParseToken(rot.Token)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := joinAs(other.Bearer(), "pi10", wire.RoleAgent); code != http.StatusUnauthorized {
		t.Errorf("join with a token revoked by the rotation: %d, want 401", code)
	}
	if code, body := joinAs(fresh.Bearer(), "pi10", wire.RoleAgent); code != http.StatusOK {
		t.Errorf("join with the rotated token: %d %s", code, body)
	}
	if _, b := adminCall(http.MethodGet, TokensPath); !bytes.Contains(b, []byte(fresh.ID)) || bytes.Count(b, []byte(`"id"`)) != 1 {
		t.Errorf("after the rotation the list is %s, want %s alone", b, fresh.ID)
	}

	// The admin API's refusals.
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, TokensPath + "?ttl=banana", http.StatusBadRequest},
		{http.MethodPost, TokensPath + "?ttl=-1h", http.StatusBadRequest},
		{http.MethodPost, TokensPath + "?ttl=100000h", http.StatusBadRequest},
		{http.MethodPost, TokensPath + "?description=" + strings.Repeat("x", 300), http.StatusBadRequest},
		{http.MethodPost, TokensPath + "?description=a%0Ab", http.StatusBadRequest},
		{http.MethodDelete, TokensPath + "/NOPE", http.StatusBadRequest},
		{http.MethodDelete, TokensPath + "/abc123", http.StatusNotFound},
		{http.MethodPost, TokensPath + "/rotate?kind=root", http.StatusBadRequest},
	} {
		if code, b := adminCall(tc.method, tc.path); code != tc.code {
			t.Errorf("%s %.60s: %d %s, want %d", tc.method, tc.path, code, b, tc.code)
		}
	}
}
