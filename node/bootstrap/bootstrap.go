// Package bootstrap is the board's side of joining a cluster: with only
// the cluster token, find the servers through the gossip of any board
// (package gossip), talk to one over TLS pinned to the CA hash the token
// carries, and come back with the cluster CA and a node credential. It is
// the one exchange with the control plane that does not go through the
// Kubernetes API, because a joining board has no credential for that yet.
//
// The protocol, on the API port, authenticated by the token's secret
// (Authorization: Bearer); a board that already has a node credential
// sends it too (CredentialHeader) to keep its name:
//
//	POST /isle/v1/join  JoinRequest → JoinResponse
package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/raft"
)

// JoinPath is the join endpoint.
const JoinPath = "/isle/v1/join"

// CredentialHeader carries a rejoining board's node credential.
const CredentialHeader = "X-Isle-Node-Credential"

// JoinRequest asks to add a board.
type JoinRequest struct {
	Name string      `json:"name"`
	Role gossip.Role `json:"role"`
	// Servers only: where the new store member is reached.
	RaftAddr string `json:"raftAddr,omitempty"`
	APIAddr  string `json:"apiAddr,omitempty"`
}

// JoinResponse is what a joined board needs.
type JoinResponse struct {
	CACert []byte `json:"caCert"`
	// NodeToken is the board's new node credential (a bearer token for the
	// Kubernetes API); empty when the board proved it already has one.
	NodeToken string `json:"nodeToken,omitempty"`
	// GossipKey encrypts the cluster's gossip. Agents keep it instead of
	// the token, whose secret also unseals the CA key.
	GossipKey []byte `json:"gossipKey"`
	// Servers only: the CA key sealed with the token's secret, and how to
	// start the new store member.
	CAKeySealed []byte         `json:"caKeySealed,omitempty"`
	Join        *raft.JoinInfo `json:"join,omitempty"`
}

// Refused is a join the cluster answered and said no to (a wrong token,
// a name taken): asking another server would not help.
type Refused struct {
	Server string
	Code   int
	Reason string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("server %s refused (HTTP %d): %s", e.Server, e.Code, e.Reason)
}

// Client talks to the servers of the cluster a token belongs to.
type Client struct {
	token wire.Token
	http  *http.Client
}

// NewClient returns a client that trusts only servers whose certificate
// chains to the CA the token names.
func NewClient(token wire.Token) *Client {
	return &Client{token: token, http: &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: wire.PinnedClientConfig(token.CAHash, "")},
	}}
}

// Join asks the servers at apiAddrs, in turn, to add this board; credential
// is its existing node credential, if any. The CA sent must be the one the
// token names.
func (c *Client) Join(ctx context.Context, apiAddrs []string, req JoinRequest, credential string) (JoinResponse, error) {
	if len(apiAddrs) == 0 {
		return JoinResponse{}, errors.New("bootstrap: join: no server known to ask")
	}
	var errs []error
	for _, addr := range apiAddrs {
		var resp JoinResponse
		err := c.Do(ctx, http.MethodPost, addr, JoinPath, req, &resp, credential)
		if err == nil {
			if ca, perr := wire.ParseCertPEM(resp.CACert); perr != nil || wire.CAHash(ca) != c.token.CAHash {
				return JoinResponse{}, fmt.Errorf("bootstrap: join through %s: the server sent a CA that is not the token's", addr)
			}
			return resp, nil
		}
		var refused *Refused
		if errors.As(err, &refused) {
			return JoinResponse{}, fmt.Errorf("bootstrap: join: %w", err)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return JoinResponse{}, fmt.Errorf("bootstrap: join: no server answered: %w", errors.Join(errs...))
}

// Do sends one request authenticated by the token to the server at addr:
// in (if not nil) as the JSON body, the JSON answer into out (if not nil).
// A 4xx answer is a *Refused.
func (c *Client) Do(ctx context.Context, method, addr, path string, in, out any, credential string) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if credential != "" {
		req.Header.Set(CredentialHeader, credential)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, wire.ErrClock) {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if strings.Contains(err.Error(), "pinned verify") {
			return fmt.Errorf("%s is not a server of the cluster this token belongs to (its certificate does not chain to the CA hash in the token): %w", addr, err)
		}
		return fmt.Errorf("%s%s: %w", addr, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		if resp.StatusCode/100 == 4 {
			return &Refused{Server: addr, Code: resp.StatusCode, Reason: e.Error}
		}
		return fmt.Errorf("%s%s: HTTP %d: %s", addr, path, resp.StatusCode, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s%s: answer: %w", addr, path, err)
		}
	}
	return nil
}

// APIAddrs are the API addresses of the alive servers among members.
func APIAddrs(members []gossip.Member) []string {
	var out []string
	for _, m := range members {
		if m.Role == gossip.RoleServer && m.API != "" && (m.State == gossip.Alive || m.State == gossip.Suspect) {
			out = append(out, m.API)
		}
	}
	return out
}

// MembersPath lists the cluster's boards (GET) and removes one (DELETE
// MembersPath/NAME); authenticated by the token's secret like JoinPath.
const MembersPath = "/isle/v1/members"

// MemberInfo is one board in `isle member list`.
type MemberInfo struct {
	Name    string       `json:"name"`
	Role    gossip.Role  `json:"role"`
	State   gossip.State `json:"state"` // as the answering server's gossip sees it; "" if unseen
	Since   time.Time    `json:"since,omitzero"`
	Address string       `json:"address,omitempty"`
	Arch    string       `json:"arch,omitempty"`
	Version string       `json:"version,omitempty"`
	// Servers: the store member's ID and standing.
	RaftID string `json:"raftID,omitempty"`
	Raft   string `json:"raft,omitempty"` // leader, voter or learner
}
