package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/kv"
)

// copyDir copies the files of a server's data directory that hold its
// identity.
func copyIdentity(t *testing.T, from, to string) {
	t.Helper()
	for _, name := range []string{tokenFile, caCertFile, caKeySealed} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFile(to, name, b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerTokenRotation replaces the server token on a store of one
// member followed by two servers: the old secret is refused from then on,
// both servers' files hold the new token and open their CA key with it,
// and a crash halfway is repaired.
func TestServerTokenRotation(t *testing.T) {
	srv, _ := storeOfOne(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, dir2 := t.TempDir(), t.TempDir()
	id, err := NewIdentity(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	copyIdentity(t, dir, dir2)
	id.live = new(atomic.Pointer[wire.Token])
	old := id.Token
	key := bytes.Repeat([]byte{3}, 32)
	st := &serverTokens{node: srv.node, id: id, gossipKey: key, dataDir: dir, log: log, now: time.Now}
	h := &joinHandler{node: srv.node, id: id, gossipKey: key, log: log, members: &membership{node: srv.node, boards: noBoards{}},
		tokens: &tokenKeeper{node: srv.node, ca: id.CA, gossipKey: key, now: time.Now, log: log}}
	admin := (&tokenKeeper{node: srv.node, ca: id.CA, gossipKey: key, now: time.Now, log: log}).handler(st)
	members := func(secret string) int {
		r := httptest.NewRequest(http.MethodGet, membersPath, nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := members(old.Secret); code != http.StatusOK {
		t.Fatalf("the first token: %d", code)
	}

	w := httptest.NewRecorder()
	admin.ServeHTTP(w, httptest.NewRequest(http.MethodPost, TokensPath+"/rotate?kind=server", nil))
	var resp wire.NewTokenResponse
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil {
		t.Fatalf("rotate: %d %s", w.Code, w.Body)
	}
	tok, err := wire.ParseToken(resp.Token)
	if err != nil || tok.IsAgent() || tok.Secret == old.Secret || tok.CAHash != old.CAHash || !bytes.Equal(tok.GossipKey, key) {
		t.Fatalf("the new token %q: %+v, %v", resp.Token, tok, err)
	}
	if code := members(old.Secret); code != http.StatusUnauthorized {
		t.Errorf("the old token after the rotation: %d, want 401", code)
	}
	if code := members(tok.Secret); code != http.StatusOK {
		t.Errorf("the new token: %d, want 200", code)
	}
	// Both servers' files, the second once it has followed the record.
	id2, err := LoadIdentity(dir2)
	if err != nil {
		t.Fatal(err)
	}
	id2.live = new(atomic.Pointer[wire.Token])
	if err := (&serverTokens{node: srv.node, id: id2, gossipKey: key, dataDir: dir2, log: log, now: time.Now}).apply(); err != nil {
		t.Fatalf("the second server follows: %v", err)
	}
	if id2.secret() != tok.Secret {
		t.Error("the second server's secret is not the new one")
	}
	for _, d := range []string{dir, dir2} {
		got, err := LoadIdentity(d)
		if err != nil || got.Token.String() != tok.String() {
			t.Errorf("%s: %+v, %v; want the new token", d, got.Token, err)
		}
		if _, err := os.Stat(filepath.Join(d, tokenNextFile)); !os.IsNotExist(err) {
			t.Errorf("%s: %s left: %v", d, tokenNextFile, err)
		}
	}

	t.Run("a crash halfway is repaired", func(t *testing.T) {
		d := t.TempDir()
		copyIdentity(t, dir, d)
		first, err := LoadIdentity(d)
		if err != nil {
			t.Fatal(err)
		}
		next, err := wire.NewToken(first.CA.Cert())
		if err != nil {
			t.Fatal(err)
		}
		sealed, _ := pki.Seal(first.CA.Signer().KeyPEM, next.Secret, pki.InfoCAKey)
		// token.next and the resealed key written, the token not yet.
		if writeFile(d, tokenNextFile, []byte(next.String()+"\n")) != nil || writeFile(d, caKeySealed, sealed) != nil {
			t.Fatal("write")
		}
		got, err := LoadIdentity(d)
		if err != nil || got.Token.Secret != next.Secret {
			t.Fatalf("after the crash: %+v, %v; want the next token", got.Token, err)
		}
		if b, _ := os.ReadFile(filepath.Join(d, tokenFile)); strings.TrimSpace(string(b)) != next.String() {
			t.Errorf("the token file holds %q", b)
		}
	})

	t.Run("refused while the CA is replaced", func(t *testing.T) {
		rec, _ := json.Marshal(wire.CARotation{Phase: wire.CAPhaseTrustBoth})
		if _, err := srv.node.Propose(t.Context(), kv.Op{Type: kv.OpPut, Key: caRotationKey, Value: rec, IfModRev: -1}); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, httptest.NewRequest(http.MethodPost, TokensPath+"/rotate?kind=server", nil))
		if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "the CA is being replaced") {
			t.Fatalf("rotate during a CA rotation: %d %s, want 409", w.Code, w.Body)
		}
	})
}
