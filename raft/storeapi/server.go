// Package storeapi serves a store member's small administration HTTP API
// (status, membership, and with the raw keys, for debugging) and is its
// client: `isle store` uses it to inspect a running member, and the store
// benchmark to write. It has no authentication of its own: servers serve
// it on a unix socket only root may open. (Servers join through the API
// server's token-authenticated join protocol, not through this.)
//
// All bodies are JSON. Keys travel in the query, so any byte string is a key.
//
//	GET    /store/v1/status                   Status of the member answering
//	GET    /store/v1/key?k=KEY[&local=1]       one key (linearizable unless local=1)
//	GET    /store/v1/kv?prefix=P&start=S&limit=N
//	PUT    /store/v1/key?k=KEY[&ifModRev=N]    body is the value
//	DELETE /store/v1/key?k=KEY[&ifModRev=N]
//	POST   /store/v1/members/ID/promote
//	DELETE /store/v1/members/ID
//	POST   /store/v1/leader                   {"to": ID}
package storeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// MaxValueSize bounds a value written through the API.
const MaxValueSize = 1 << 20

// Handler serves the store API of node; the keys (get, list, put,
// delete), which go past every check of the API server, only with keys.
func Handler(node *raft.Node, log *slog.Logger, keys bool, opts ...Option) http.Handler {
	s := &server{node: node, log: log}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /store/v1/status", s.status)
	if keys {
		mux.HandleFunc("GET /store/v1/key", s.get)
		mux.HandleFunc("GET /store/v1/kv", s.list)
		mux.HandleFunc("PUT /store/v1/key", s.put)
		mux.HandleFunc("DELETE /store/v1/key", s.del)
	} else {
		off := func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusForbidden, Error{"the store's keys are served only with isle server --debug"})
		}
		mux.HandleFunc("/store/v1/key", off)
		mux.HandleFunc("/store/v1/kv", off)
	}
	mux.HandleFunc("POST /store/v1/members/{id}/promote", s.promote)
	mux.HandleFunc("DELETE /store/v1/members/{id}", s.removeMember)
	mux.HandleFunc("POST /store/v1/leader", s.transferLeader)
	return mux
}

type server struct {
	node *raft.Node
	log  *slog.Logger
	show func(key string, value []byte) []byte
}

// Option changes what a Handler serves.
type Option func(*server)

// ShowValues makes the Handler answer with show(key, value) in place of
// each stored value: the store's user reading its own format (compressed
// values expanded, for one).
func ShowValues(show func(key string, value []byte) []byte) Option {
	return func(s *server) { s.show = show }
}

// requestTimeout bounds every request's wait for the store.
const requestTimeout = 10 * time.Second

// KeyValue is a key as the API shows it.
type KeyValue struct {
	Key            string `json:"key"`
	Value          string `json:"value"`
	CreateRevision int64  `json:"createRevision"`
	ModRevision    int64  `json:"modRevision"`
	Version        int64  `json:"version"`
}

// GetResponse answers a GET of one key.
type GetResponse struct {
	KV       *KeyValue `json:"kv,omitempty"`
	Revision int64     `json:"revision"`
}

// ListResponse answers a GET of a prefix.
type ListResponse struct {
	KVs      []KeyValue `json:"kvs"`
	More     bool       `json:"more,omitempty"`
	Revision int64      `json:"revision"`
}

// WriteResponse answers a PUT or DELETE.
type WriteResponse struct {
	Succeeded bool      `json:"succeeded"`
	Revision  int64     `json:"revision"`
	Current   *KeyValue `json:"current,omitempty"`
}

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}

func (s *server) toAPI(v kv.KeyValue) *KeyValue {
	value := v.Value
	if s.show != nil {
		value = s.show(v.Key, value)
	}
	return &KeyValue{Key: v.Key, Value: string(value), CreateRevision: v.CreateRevision, ModRevision: v.ModRevision, Version: v.Version}
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	st, err := s.node.Status(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	key := r.URL.Query().Get("k")
	if key == "" {
		writeJSON(w, http.StatusBadRequest, Error{"missing key: give it as ?k=KEY"})
		return
	}
	v, ok, rev, err := s.node.Get(ctx, key, r.URL.Query().Get("local") == "")
	if err != nil {
		s.fail(w, err)
		return
	}
	resp := GetResponse{Revision: rev}
	if ok {
		resp.KV = s.toAPI(v)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, Error{fmt.Sprintf("limit %q: want a non-negative integer", l)})
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	kvs, more, rev, err := s.node.List(ctx, q.Get("prefix"), q.Get("start"), limit, q.Get("local") == "")
	if err != nil {
		s.fail(w, err)
		return
	}
	resp := ListResponse{KVs: make([]KeyValue, 0, len(kvs)), More: more, Revision: rev}
	for _, v := range kvs {
		resp.KVs = append(resp.KVs, *s.toAPI(v))
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) put(w http.ResponseWriter, r *http.Request) {
	value, err := io.ReadAll(io.LimitReader(r.Body, MaxValueSize+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, Error{"read body: " + err.Error()})
		return
	}
	if len(value) > MaxValueSize {
		writeJSON(w, http.StatusRequestEntityTooLarge, Error{fmt.Sprintf("value is over %d bytes", MaxValueSize)})
		return
	}
	s.write(w, r, kv.Op{Type: kv.OpPut, Key: r.URL.Query().Get("k"), Value: value})
}

func (s *server) del(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, kv.Op{Type: kv.OpDelete, Key: r.URL.Query().Get("k")})
}

func (s *server) write(w http.ResponseWriter, r *http.Request, op kv.Op) {
	if op.Key == "" {
		writeJSON(w, http.StatusBadRequest, Error{"missing key: give it as ?k=KEY"})
		return
	}
	op.IfModRev = -1
	if c := r.URL.Query().Get("ifModRev"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, Error{fmt.Sprintf("ifModRev %q: want a non-negative integer", c)})
			return
		}
		op.IfModRev = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := s.node.Propose(ctx, op)
	if err != nil {
		s.fail(w, err)
		return
	}
	resp := WriteResponse{Succeeded: res.Succeeded, Revision: res.Revision}
	if res.Current != nil {
		resp.Current = s.toAPI(*res.Current)
	}
	code := http.StatusOK
	if !res.Succeeded {
		code = http.StatusConflict
	}
	writeJSON(w, code, resp)
}

func (s *server) promote(w http.ResponseWriter, r *http.Request) {
	s.memberOp(w, r, s.node.Promote)
}

func (s *server) removeMember(w http.ResponseWriter, r *http.Request) {
	s.memberOp(w, r, s.node.RemoveMember)
}

func (s *server) memberOp(w http.ResponseWriter, r *http.Request, op func(context.Context, uint64) error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 16, 64)
	if err != nil || id == 0 {
		writeJSON(w, http.StatusBadRequest, Error{fmt.Sprintf("member ID %q: want a non-zero hexadecimal number", r.PathValue("id"))})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if err := op(ctx, id); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TransferRequest asks the leader to hand over leadership.
type TransferRequest struct {
	To string `json:"to"` // member ID in hexadecimal
}

func (s *server) transferLeader(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, Error{"decode request: " + err.Error()})
		return
	}
	r.SetPathValue("id", req.To)
	s.memberOp(w, r, s.node.TransferLeader)
}

// fail maps store errors to HTTP statuses.
func (s *server) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, raft.ErrRefused):
		code = http.StatusConflict
	case errors.Is(err, raft.ErrNoLeader), errors.Is(err, raft.ErrStopped):
		code = http.StatusServiceUnavailable
	case errors.Is(err, raft.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	if code == http.StatusInternalServerError {
		s.log.Error("store API", "err", err)
	}
	writeJSON(w, code, Error{strings.TrimSpace(err.Error())})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
