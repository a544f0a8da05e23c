package storeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/isle-cluster/isle/raft"
)

// ErrConflict is returned by writes whose precondition failed.
var ErrConflict = errors.New("store: precondition failed")

// Client talks to one member's store API.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client for the member at addr: the path of its
// unix socket (starting with /), "host:port" or a URL.
func NewClient(addr string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	if strings.HasPrefix(addr, "/") {
		hc.Transport, addr = UnixTransport(addr), "http://isle"
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	// A redirect is never an answer of the store API: following one could
	// turn a PUT into a GET that looks like success.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: strings.TrimRight(addr, "/"), http: hc}
}

// UnixTransport is an HTTP transport to the unix socket at path, whatever
// the request's host.
func UnixTransport(path string) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
}

// Status returns the member's status.
func (c *Client) Status(ctx context.Context) (raft.Status, error) {
	var st raft.Status
	err := c.do(ctx, http.MethodGet, "/store/v1/status", nil, &st)
	return st, err
}

// Get reads one key; local skips the linearizable read.
func (c *Client) Get(ctx context.Context, key string, local bool) (GetResponse, error) {
	var r GetResponse
	p := "/store/v1/key?" + url.Values{"k": {key}}.Encode()
	if local {
		p += "&local=1"
	}
	err := c.do(ctx, http.MethodGet, p, nil, &r)
	return r, err
}

// List reads keys with a prefix.
func (c *Client) List(ctx context.Context, prefix string, limit int) (ListResponse, error) {
	var r ListResponse
	q := url.Values{"prefix": {prefix}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	err := c.do(ctx, http.MethodGet, "/store/v1/kv?"+q.Encode(), nil, &r)
	return r, err
}

// Put writes a key. ifModRev < 0 means unconditionally.
func (c *Client) Put(ctx context.Context, key string, value []byte, ifModRev int64) (WriteResponse, error) {
	return c.write(ctx, http.MethodPut, key, value, ifModRev)
}

// Delete deletes a key. ifModRev < 0 means unconditionally.
func (c *Client) Delete(ctx context.Context, key string, ifModRev int64) (WriteResponse, error) {
	return c.write(ctx, http.MethodDelete, key, nil, ifModRev)
}

func (c *Client) write(ctx context.Context, method, key string, value []byte, ifModRev int64) (WriteResponse, error) {
	var r WriteResponse
	q := url.Values{"k": {key}}
	if ifModRev >= 0 {
		q.Set("ifModRev", strconv.FormatInt(ifModRev, 10))
	}
	if err := c.do(ctx, method, "/store/v1/key?"+q.Encode(), value, &r); err != nil {
		return r, err
	}
	if !r.Succeeded || r.Revision <= 0 {
		return r, fmt.Errorf("store: %s %q: answer without a successful revision", method, key)
	}
	return r, nil
}

// Promote asks the leader to make a learner a voter.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	return c.do(ctx, http.MethodPost, fmt.Sprintf("/store/v1/members/%x/promote", id), nil, nil)
}

// RemoveMember asks the leader to remove a member.
func (c *Client) RemoveMember(ctx context.Context, id uint64) error {
	return c.do(ctx, http.MethodDelete, fmt.Sprintf("/store/v1/members/%x", id), nil, nil)
}

// TransferLeader asks the leader to hand leadership to a member.
func (c *Client) TransferLeader(ctx context.Context, to uint64) error {
	b, _ := json.Marshal(TransferRequest{To: strconv.FormatUint(to, 16)})
	return c.do(ctx, http.MethodPost, "/store/v1/leader", b, nil)
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("store: HTTP %d: %s", e.Code, e.Message) }

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", method, path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("store: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusConflict && out != nil {
		if jerr := json.Unmarshal(data, out); jerr == nil {
			if wr, ok := out.(*WriteResponse); ok && !wr.Succeeded && wr.Revision > 0 {
				return ErrConflict
			}
		}
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &StatusError{Code: resp.StatusCode, Message: e.Error}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("store: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
