// Package bootstrap is the board's side of joining a cluster: with only
// the cluster token, find the servers through the gossip of any board
// (package gossip), talk to one over TLS pinned to the CA hash the token
// carries, and come back with the cluster CA and a node credential. It is
// the one exchange with the control plane that does not go through the
// Kubernetes API, because a joining board has no credential for that yet.
//
// The protocol, on the API port, authenticated by the token's secret
// (Authorization: Bearer); a board that already has a node credential
// sends it too (wire.CredentialHeader) to keep its name:
//
//	POST /isle/v1/join  wire.JoinRequest → wire.JoinResponse
//	GET  /isle/v1/time  wire.TimeResponse (no authentication; ServerTime)
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
	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/node/gossip"
)

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
// chains to the CA the token names, valid at now() (nil: the system's
// time), the board's clock.
func NewClient(token wire.Token, now func() time.Time) *Client {
	return &Client{token: token, http: &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: wire.PinnedClientConfig(token.CAHash, "", now)},
	}}
}

// ServerTime asks the servers at apiAddrs, in turn, for their time
// (wire.TimePath) over TLS pinned to the CA of hash caHash, and returns the
// first answer wire.CheckServerTime accepts with floor (clock.Earliest):
// its time taken half the round trip after the server read its clock.
func ServerTime(ctx context.Context, caHash string, apiAddrs []string, floor time.Time) (clock.Reading, error) {
	if len(apiAddrs) == 0 {
		return clock.Reading{}, errors.New("bootstrap: server time: no server known to ask")
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: wire.TimeClientConfig(caHash, floor), DisableKeepAlives: true}}
	var errs []error
	for _, addr := range apiAddrs {
		r, err := serverTime(ctx, c, addr, caHash, floor)
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return clock.Reading{}, fmt.Errorf("bootstrap: server time: %w", errors.Join(errs...))
}

func serverTime(ctx context.Context, c *http.Client, addr, caHash string, floor time.Time) (clock.Reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+wire.TimePath, nil)
	if err != nil {
		return clock.Reading{}, err
	}
	sent := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return clock.Reading{}, err
	}
	defer resp.Body.Close()
	at := time.Now()
	if resp.StatusCode != http.StatusOK {
		return clock.Reading{}, fmt.Errorf("HTTP %d (a server older than this board?)", resp.StatusCode)
	}
	var tr wire.TimeResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&tr); err != nil {
		return clock.Reading{}, fmt.Errorf("answer: %w", err)
	}
	if resp.TLS == nil {
		return clock.Reading{}, errors.New("answer not over TLS")
	}
	if err := wire.CheckServerTime(tr.Time, resp.TLS.PeerCertificates, caHash, floor); err != nil {
		return clock.Reading{}, err
	}
	return clock.Reading{Source: "the cluster's", Server: addr, Time: tr.Time.Add(at.Sub(sent) / 2), At: at}, nil
}

// Join asks the servers at apiAddrs, in turn, to add this board; credential
// is its existing node credential, if any. The CA sent must be the one the
// token names.
func (c *Client) Join(ctx context.Context, apiAddrs []string, req wire.JoinRequest, credential string) (wire.JoinResponse, error) {
	if len(apiAddrs) == 0 {
		return wire.JoinResponse{}, errors.New("bootstrap: join: no server known to ask")
	}
	var errs []error
	for _, addr := range apiAddrs {
		var resp wire.JoinResponse
		err := c.Do(ctx, http.MethodPost, addr, wire.JoinPath, req, &resp, credential)
		if err == nil {
			if ca, perr := wire.ParseCertPEM(resp.CACert); perr != nil || wire.CAHash(ca) != c.token.CAHash {
				return wire.JoinResponse{}, fmt.Errorf("bootstrap: join through %s: the server sent a CA that is not the token's", addr)
			}
			return resp, nil
		}
		var refused *Refused
		if errors.As(err, &refused) {
			return wire.JoinResponse{}, fmt.Errorf("bootstrap: join: %w", err)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return wire.JoinResponse{}, fmt.Errorf("bootstrap: join: no server answered: %w", errors.Join(errs...))
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
	req.Header.Set("Authorization", "Bearer "+c.token.Bearer())
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if credential != "" {
		req.Header.Set(wire.CredentialHeader, credential)
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
