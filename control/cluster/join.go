package cluster

import (
	"bytes"
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
	"github.com/isle-cluster/isle/raft"
)

// The join protocol, served on the API port under /isle/v1/ and
// authenticated by the cluster token's secret (Authorization: Bearer).
// The joiner pins the server's CA by the hash in the token, so it talks to
// the right cluster before it sends the secret.
//
//	POST /isle/v1/join     {name, raftAddr, apiAddr}  → {member, caCert, caKeySealed}
//	POST /isle/v1/promote  {id}                       → 204 once the learner is a voter
//	POST /isle/v1/nodetoken {node}                    → {token, caCert}: a node's bearer token

type joinRequest struct {
	Name     string `json:"name"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr"`
}

type joinResponse struct {
	Join        raft.JoinInfo `json:"join"`
	CACert      []byte        `json:"caCert"`
	CAKeySealed []byte        `json:"caKeySealed"`
}

type promoteRequest struct {
	ID uint64 `json:"id,string"`
}

type nodeTokenRequest struct {
	Node string `json:"node"`
}

type nodeTokenResponse struct {
	Token  string `json:"token"`
	CACert []byte `json:"caCert"`
}

// joinHandler serves /isle/v1/.
type joinHandler struct {
	node *raft.Node
	id   Identity
	log  *slog.Logger
}

func (h *joinHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(secret), []byte(h.id.Token.Secret)) != 1 {
		h.log.Warn("cluster: join request with a wrong token refused", "from", r.RemoteAddr)
		httpError(w, http.StatusUnauthorized, "the token is not this cluster's")
		return
	}
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	body := io.LimitReader(r.Body, 64<<10)
	switch r.URL.Path {
	case "/isle/v1/join":
		var req joinRequest
		if err := json.NewDecoder(body).Decode(&req); err != nil || req.Name == "" || req.RaftAddr == "" || req.APIAddr == "" {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("a join request needs name, raftAddr and apiAddr (%v)", err))
			return
		}
		info, err := h.node.AddLearner(ctx, raft.Member{Name: req.Name, RaftAddr: req.RaftAddr, ClientAddr: req.APIAddr})
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, raft.ErrRefused) {
				code = http.StatusConflict
			}
			httpError(w, code, err.Error())
			return
		}
		sealed, err := pki.Seal(h.id.CA.KeyPEM, h.id.Token.Secret, pki.InfoCAKey)
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		h.log.Info("cluster: server joined as a learner", "name", req.Name, "id", fmt.Sprintf("%x", info.MemberID), "raft", req.RaftAddr)
		writeJSON(w, http.StatusOK, joinResponse{Join: info, CACert: h.id.CA.CertPEM, CAKeySealed: sealed})
	case "/isle/v1/promote":
		var req promoteRequest
		if err := json.NewDecoder(body).Decode(&req); err != nil || req.ID == 0 {
			httpError(w, http.StatusBadRequest, "a promote request needs the member id")
			return
		}
		if err := h.node.Promote(ctx, req.ID); err != nil {
			httpError(w, http.StatusConflict, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "/isle/v1/nodetoken":
		var req nodeTokenRequest
		if err := json.NewDecoder(body).Decode(&req); err != nil || validation.IsDNS1123Subdomain(req.Node) != nil {
			httpError(w, http.StatusBadRequest, "a node token request needs the node's name (a DNS subdomain)")
			return
		}
		token, err := issueNodeToken(ctx, h.node, req.Node)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		h.log.Info("cluster: node credential issued", "node", req.Node)
		writeJSON(w, http.StatusOK, nodeTokenResponse{Token: token, CACert: h.id.CA.CertPEM})
	default:
		httpError(w, http.StatusNotFound, "no such isle endpoint")
	}
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// joinClient talks to a server of the cluster with only the token.
type joinClient struct {
	token pki.Token
	http  *http.Client
}

func newJoinClient(token pki.Token) *joinClient {
	return &joinClient{token: token, http: &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: pki.PinnedClientConfig(token.CAHash, "")},
	}}
}

func (c *joinClient) post(ctx context.Context, addr, path string, in, out any) error {
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		var tlsErr *tls.CertificateVerificationError
		if errors.As(err, &tlsErr) {
			return fmt.Errorf("%s is not a server of the cluster this token belongs to: %w", addr, err)
		}
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e map[string]string
		_ = json.Unmarshal(data, &e)
		return fmt.Errorf("%s%s: HTTP %d: %s", addr, path, resp.StatusCode, e["error"])
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// join asks the server at addr to add this board; it returns the store's
// join information and the cluster identity.
func (c *joinClient) join(ctx context.Context, addr string, req joinRequest) (raft.JoinInfo, Identity, error) {
	var resp joinResponse
	if err := c.post(ctx, addr, "/isle/v1/join", req, &resp); err != nil {
		return raft.JoinInfo{}, Identity{}, fmt.Errorf("join through %s: %w", addr, err)
	}
	keyPEM, err := pki.Open(resp.CAKeySealed, c.token.Secret, pki.InfoCAKey)
	if err != nil {
		return raft.JoinInfo{}, Identity{}, fmt.Errorf("join through %s: %w", addr, err)
	}
	ca, err := pki.ParseCA(resp.CACert, keyPEM)
	if err != nil {
		return raft.JoinInfo{}, Identity{}, fmt.Errorf("join through %s: %w", addr, err)
	}
	if pki.CAHash(ca.Cert) != c.token.CAHash {
		return raft.JoinInfo{}, Identity{}, fmt.Errorf("join through %s: the cluster sent a CA that is not the token's", addr)
	}
	return resp.Join, Identity{Token: c.token, CA: ca}, nil
}

// promoteSelf asks the leader, until it agrees, to make this new member a
// voter; the leader agrees once the member has caught up.
func promoteSelf(ctx context.Context, node *raft.Node, c *joinClient, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-node.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		lead, self := node.Leader(), node.ID()
		var leaderAddr string
		learner := true
		for _, m := range node.Members() {
			if m.ID == lead {
				leaderAddr = m.ClientAddr
			}
			if m.ID == self {
				learner = m.Learner
			}
		}
		if !learner {
			log.Info("cluster: this server is now a voter", "id", fmt.Sprintf("%x", self))
			return
		}
		if leaderAddr == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.post(rctx, leaderAddr, "/isle/v1/promote", promoteRequest{ID: self}, nil)
		cancel()
		if err != nil {
			log.Debug("cluster: promotion not yet granted", "err", err)
		}
	}
}
