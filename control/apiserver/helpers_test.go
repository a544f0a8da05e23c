package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/controllers/clusterroleaggregation"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

const wait = 10 * time.Second

// Bearer tokens the test server knows.
const (
	adminToken  = "admin-token"
	nodeAToken  = "node-a-token"
	nobodyToken = "nobody-token"
)

var users = map[string]*apiserver.User{
	adminToken:  {Name: "admin", Groups: []string{authz.GroupMasters}},
	nodeAToken:  {Name: authz.NodeUserPrefix + "a", Groups: []string{authz.GroupNodes}},
	nobodyToken: {Name: "nobody"},
}

// env is an API server on a one-member store, served over plain HTTP
// (client certificates need TLS; these tests use bearer tokens).
type env struct {
	store    *registry.Store
	srv      *httptest.Server
	ctx      context.Context
	notReady atomic.Bool // makes the Ready check fail
	tokens   *testTokens // its service-account token keys
}

// newEnv starts the server; each of with may change its Config first.
func newEnv(t testing.TB, with ...func(*apiserver.Config)) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	e := &env{store: store, ctx: t.Context(), tokens: &testTokens{}}
	// The authorizers as a server has them, with the bootstrap policy.
	index := authz.NewIndex(store, log)
	go index.Run(t.Context())
	if err := authz.Reconcile(t.Context(), store); err != nil {
		t.Fatal(err)
	}
	go clusterroleaggregation.New(store, log).Run(t.Context()) // admin, edit and view get their rules
	cfg := apiserver.Config{
		Store: store, AdvertiseAddr: "127.0.0.1:6443", Logger: log,
		Authz:           &authz.Chain{RBAC: &authz.RBAC{Index: index}, Node: &authz.NodeAuthorizer{Index: index}},
		ServiceAccounts: e.tokens,
		Tokens: func(_ context.Context, tok string) (*apiserver.User, bool) {
			u, ok := users[tok]
			return u, ok
		},
		Ready: func(context.Context) error {
			if e.notReady.Load() {
				return errors.New("no quorum")
			}
			return nil
		},
	}
	for _, f := range with {
		f(&cfg)
	}
	api := apiserver.New(cfg)
	e.srv = httptest.NewServer(api)
	t.Cleanup(e.srv.Close)
	nsr, _ := store.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if _, err := store.Create(e.ctx, nsr, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) String() string {
	b := string(r.body)
	if len(b) > 600 {
		b = b[:600] + "…"
	}
	return b
}

// status decodes an error body.
func (r response) status(t testing.TB) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body is not a Status (%v): %s", err, r)
	}
	return st
}

func (r response) decode(t testing.TB, into any) {
	t.Helper()
	if err := json.Unmarshal(r.body, into); err != nil {
		t.Fatalf("decode %T: %v: %s", into, err, r)
	}
}

// req is one request to the test server.
type req struct {
	method, path, token string
	body                string
	header              map[string]string
}

func (e *env) do(t testing.TB, rq req) response {
	t.Helper()
	if rq.method == "" {
		rq.method = http.MethodGet
	}
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	hr, err := http.NewRequestWithContext(e.ctx, rq.method, e.srv.URL+rq.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if rq.token != "" {
		hr.Header.Set("Authorization", "Bearer "+rq.token)
	}
	for k, v := range rq.header {
		hr.Header.Set(k, v)
	}
	client := *e.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // redirects are answers too
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", rq.method, rq.path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// admin sends a request as an administrator.
func (e *env) admin(t testing.TB, method, path, body string, header ...string) response {
	t.Helper()
	return e.as(t, adminToken, method, path, body, header...)
}

// as sends a request as the user of token; header is name, value pairs.
func (e *env) as(t testing.TB, token, method, path, body string, header ...string) response {
	t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	if body != "" && h["Content-Type"] == "" {
		h["Content-Type"] = "application/json"
	}
	return e.do(t, req{method: method, path: path, token: token, body: body, header: h})
}

// mustCode fails unless the response has the code.
func mustCode(t testing.TB, r response, code int) response {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r)
	}
	return r
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func podJSON(name, node string) string {
	p := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"app": name}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
	}
	if node != "" {
		p["spec"].(map[string]any)["nodeName"] = node
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bigBody(n int) string { return string(bytes.Repeat([]byte("a"), n)) }
