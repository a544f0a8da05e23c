package storeapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft/rafttest"
	"github.com/isle-cluster/isle/raft/storeapi"
)

func newAPI(t *testing.T) (*storeapi.Client, string) {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	srv := httptest.NewServer(storeapi.Handler(c.Node(c.IDs()[0]), slog.New(slog.NewTextHandler(io.Discard, nil)), true))
	t.Cleanup(srv.Close)
	return storeapi.NewClient(srv.URL, nil), srv.URL
}

func TestKeys(t *testing.T) {
	cl, _ := newAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	w, err := cl.Put(ctx, "/a/b c", []byte("v1"), 0)
	if err != nil || w.Revision != 1 {
		t.Fatalf("create: %+v %v", w, err)
	}
	if _, err := cl.Put(ctx, "/a/b c", []byte("v2"), 0); !errors.Is(err, storeapi.ErrConflict) {
		t.Fatalf("second create: got %v, want ErrConflict", err)
	}
	if _, err := cl.Put(ctx, "/a/b c", []byte("v2"), 1); err != nil {
		t.Fatalf("update at revision 1: %v", err)
	}
	g, err := cl.Get(ctx, "/a/b c", false)
	if err != nil || g.KV == nil || g.KV.Value != "v2" || g.KV.Version != 2 || g.KV.CreateRevision != 1 {
		t.Fatalf("get: %+v %v", g.KV, err)
	}
	if _, err := cl.Put(ctx, "/a/other", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	l, err := cl.List(ctx, "/a/", 1)
	if err != nil || len(l.KVs) != 1 || !l.More || l.Revision != 3 {
		t.Fatalf("list with limit 1: %+v %v", l, err)
	}
	if _, err := cl.Delete(ctx, "/a/other", -1); err != nil {
		t.Fatal(err)
	}
	g, err = cl.Get(ctx, "/a/other", true)
	if err != nil || g.KV != nil {
		t.Fatalf("get after delete: %+v %v", g, err)
	}
	st, err := cl.Status(ctx)
	if err != nil || st.Role != "leader" || len(st.Members) != 1 || st.Revision != 4 {
		t.Fatalf("status: %+v %v", st, err)
	}
}

func TestBadRequests(t *testing.T) {
	_, url := newAPI(t)
	cases := []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"missing key", "PUT", "/store/v1/key", "v", 400, "missing key"},
		{"bad precondition", "PUT", "/store/v1/key?k=a&ifModRev=x", "v", 400, "ifModRev"},
		{"negative precondition", "DELETE", "/store/v1/key?k=a&ifModRev=-2", "", 400, "ifModRev"},
		{"value too large", "PUT", "/store/v1/key?k=a", strings.Repeat("x", storeapi.MaxValueSize+1), 413, "over"},
		{"bad limit", "GET", "/store/v1/kv?limit=-1", "", 400, "limit"},
		{"bad member ID", "POST", "/store/v1/members/zz/promote", "", 400, "hexadecimal"},
		{"unknown member", "DELETE", "/store/v1/members/abc", "", 409, "no such member"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Fatalf("got %d %s, want %d containing %q", resp.StatusCode, b, tc.code, tc.msg)
			}
		})
	}
}

// ShowValues answers with the values as the store's user reads them, in
// get and list alike.
func TestShowValues(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	srv := httptest.NewServer(storeapi.Handler(c.Node(c.IDs()[0]), slog.New(slog.DiscardHandler), true,
		storeapi.ShowValues(func(key string, value []byte) []byte { return []byte(key + "=" + strings.ToUpper(string(value))) })))
	t.Cleanup(srv.Close)
	cl := storeapi.NewClient(srv.URL, nil)
	ctx := t.Context()
	if _, err := cl.Put(ctx, "/k", []byte("packed"), -1); err != nil {
		t.Fatal(err)
	}
	if g, err := cl.Get(ctx, "/k", false); err != nil || g.KV == nil || g.KV.Value != "/k=PACKED" {
		t.Fatalf("get: %+v %v, want /k=PACKED", g.KV, err)
	}
	if l, err := cl.List(ctx, "/", 0); err != nil || len(l.KVs) != 1 || l.KVs[0].Value != "/k=PACKED" {
		t.Fatalf("list: %+v %v, want /k=PACKED", l, err)
	}
}
