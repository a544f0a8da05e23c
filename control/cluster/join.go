package cluster

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
)

// joinHandler serves the join protocol (package bootstrap) and the
// membership endpoints under /isle/v1/, authenticated by a token: the
// server token admits servers and agents and serves the membership
// endpoints; an agent token (agenttokens.go) admits agents alone. The
// joiner pins the server's CA by the hash in the token, so it talks to
// the right cluster before it sends the secret.
type joinHandler struct {
	node      *raft.Node
	id        Identity
	gossipKey []byte
	tokens    *tokenKeeper
	log       *slog.Logger
	members   *membership
}

// access is what a request's token allows.
type access int

const (
	accessAgent  access = iota + 1 // join as an agent
	accessServer                   // everything: the server token
)

// authenticate says what the request's token allows, or why none.
func (h *joinHandler) authenticate(r *http.Request) (access, error) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, fmt.Errorf("%w: no token sent", errTokenRefused)
	}
	if subtle.ConstantTimeCompare([]byte(bearer), []byte(h.id.secret())) == 1 {
		return accessServer, nil
	}
	if err := h.tokens.checkAgent(bearer); err != nil {
		return 0, err
	}
	return accessAgent, nil
}

func (h *joinHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	acc, err := h.authenticate(r)
	if err != nil {
		h.log.Warn("cluster: request with a wrong token refused", "path", r.URL.Path, "from", r.RemoteAddr, "err", err)
		httpError(w, http.StatusUnauthorized, strings.TrimPrefix(err.Error(), errTokenRefused.Error()+": "))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if acc != accessServer && !(r.URL.Path == wire.JoinPath && r.Method == http.MethodPost) {
		h.log.Warn("cluster: an agent token refused for an administrator's request", "method", r.Method, "path", r.URL.Path, "from", r.RemoteAddr)
		httpError(w, http.StatusForbidden, fmt.Sprintf("%s %s needs the server token; an agent token only joins agents", r.Method, r.URL.Path))
		return
	}
	switch {
	case r.URL.Path == wire.JoinPath && r.Method == http.MethodPost:
		h.join(ctx, w, r, acc)
	case r.URL.Path == membersPath && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, h.members.list())
	case strings.HasPrefix(r.URL.Path, membersPath+"/") && r.Method == http.MethodDelete:
		// The leader changes the store's membership: another server asks it.
		if leader := h.leaderAddr(); leader != "" {
			h.forward(ctx, w, r, leader)
			return
		}
		h.members.serveRemove(ctx, w, strings.TrimPrefix(r.URL.Path, membersPath+"/"))
	default:
		httpError(w, http.StatusNotFound, fmt.Sprintf("no isle endpoint %s %s", r.Method, r.URL.Path))
	}
}

func (h *joinHandler) join(ctx context.Context, w http.ResponseWriter, r *http.Request, acc access) {
	var req wire.JoinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("join request: %v", err))
		return
	}
	if errs := validation.IsDNS1123Subdomain(req.Name); len(errs) > 0 {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("join request: name %q: %s", req.Name, strings.Join(errs, "; ")))
		return
	}
	switch req.Role {
	case wire.RoleAgent:
	case wire.RoleServer:
		if acc != accessServer {
			h.log.Warn("cluster: join as a server with an agent token refused", "name", req.Name, "from", r.RemoteAddr)
			httpError(w, http.StatusForbidden, "join request: an agent token admits agents only; a server joins with the server token (the file token in a server's data directory)")
			return
		}
		if req.RaftAddr == "" || req.APIAddr == "" {
			httpError(w, http.StatusBadRequest, "join request: a server needs raftAddr and apiAddr")
			return
		}
	default:
		httpError(w, http.StatusBadRequest, fmt.Sprintf("join request: role %q: want server or agent", req.Role))
		return
	}
	if err := wire.CheckSkew(wire.Release, req.Release, req.Role); err != nil {
		h.log.Warn("cluster: join refused by the version skew policy", "name", req.Name, "from", r.RemoteAddr, "err", err)
		httpError(w, http.StatusConflict, "join request: "+err.Error())
		return
	}

	// A board that has the name's credential keeps its name; any other
	// board asking for a taken name is refused.
	var resp wire.JoinResponse
	resp.CACert, resp.GossipKey = h.id.CA.BundlePEM(), h.gossipKey
	if cred := r.Header.Get(wire.CredentialHeader); cred != "" {
		if n, ok := nodeOfToken(h.node.KV(), cred); !ok || n != req.Name {
			h.log.Warn("cluster: join refused: a node credential that is not the name's", "name", req.Name, "from", r.RemoteAddr)
			httpError(w, http.StatusUnauthorized, fmt.Sprintf("the node credential sent is not %q's", req.Name))
			return
		}
	} else {
		token, err := issueNodeToken(ctx, h.node, req.Name)
		if errors.Is(err, errNameTaken) {
			h.log.Warn("cluster: join refused: the name belongs to another board", "name", req.Name, "from", r.RemoteAddr)
			httpError(w, http.StatusConflict, fmt.Sprintf("a board named %q is already in the cluster: give this board another --name, or, if it replaces that board, remove the old one first (isle member remove %s)", req.Name, req.Name))
			return
		}
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		resp.NodeToken = token
	}
	if req.Role == wire.RoleServer {
		info, err := h.node.AddLearner(ctx, raft.Member{Name: req.Name, RaftAddr: req.RaftAddr, ClientAddr: req.APIAddr})
		if err != nil {
			if resp.NodeToken != "" {
				_ = forgetNode(ctx, h.node, req.Name)
			}
			code := http.StatusServiceUnavailable
			if errors.Is(err, raft.ErrRefused) {
				code = http.StatusConflict
			}
			httpError(w, code, err.Error())
			return
		}
		sealed, err := pki.Seal(h.id.CA.Signer().KeyPEM, h.id.secret(), pki.InfoCAKey)
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		_, resp.RaftTLS, _ = h.node.KV().Get(raftTLSKey)
		resp.CAKeySealed, resp.Join = sealed, &info
		h.log.Info("cluster: server joined as a learner", "name", req.Name, "id", fmt.Sprintf("%x", info.MemberID), "raft", req.RaftAddr)
	} else {
		h.log.Info("cluster: agent joined", "name", req.Name, "from", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, resp)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// leaderAddr is the API address of the store's leader when it is another
// server, else "".
func (h *joinHandler) leaderAddr() string {
	lead := h.node.Leader()
	if lead == 0 || lead == h.node.ID() {
		return ""
	}
	for _, m := range h.node.Members() {
		if m.ID == lead {
			return m.ClientAddr
		}
	}
	return ""
}

// forward sends r to the API server at addr (the leader), verified by the
// cluster CA, and copies its answer back.
func (h *joinHandler) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "https://"+addr+r.URL.Path, nil)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: h.id.CA.Pool(), ServerName: wire.APIServerName}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("ask the leader (%s): %v", addr, err))
		return
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<20))
	h.log.Info("cluster: a member removal handed to the leader", "path", r.URL.Path, "leader", addr, "status", resp.StatusCode)
}
