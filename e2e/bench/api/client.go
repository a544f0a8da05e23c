package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// apiClient makes HTTPS requests to the server with the administrator's
// client certificate, over HTTP/2 when the server offers it, as kubectl
// (client-go) does: one connection that every goroutine shares.
type apiClient struct {
	base string
	http *http.Client
	// impersonate, if set, is the user the requests act as.
	impersonate string
}

// requestTimeout bounds one request, LISTs of everything included.
const requestTimeout = 30 * time.Second

// newAdminClient builds a client with the certificate, key and CA of the
// administrator's configuration, on a transport of its own.
func newAdminClient(cfg *rest.Config) (*apiClient, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	tr := &http.Transport{
		Proxy:               nil, // all traffic stays on 127.0.0.1
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true, // no gzip on loopback: measure the server, not compression
	}
	return &apiClient{base: cfg.Host, http: &http.Client{Timeout: requestTimeout, Transport: tr}}, nil
}

func (c *apiClient) close() { c.http.CloseIdleConnections() }

// do sends one request and reads the whole answer.
func (c *apiClient) do(ctx context.Context, method, path, accept, contentType string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.impersonate != "" {
		req.Header.Set("Impersonate-User", c.impersonate)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err // a *url.Error: it names the method and URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

func (c *apiClient) get(ctx context.Context, path, accept string) (int, []byte, error) {
	return c.do(ctx, http.MethodGet, path, accept, "", nil)
}

// protocol returns the HTTP protocol the server answers with.
func (c *apiClient) protocol(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return "", fmt.Errorf("probe protocol: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("probe protocol: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Proto, nil
}
