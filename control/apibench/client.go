package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// apiClient makes HTTPS requests to the server with the administrator's
// client certificate, over HTTP/2 when the server offers it, as kubectl
// (client-go) does: one connection that every goroutine shares.
type apiClient struct {
	base string
	http *http.Client
}

// kubeconfigFile is the part of a kubeconfig the client needs.
type kubeconfigFile struct {
	Clusters []struct {
		Cluster struct {
			CA string `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			Cert string `json:"client-certificate-data"`
			Key  string `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// requestTimeout bounds one request, LISTs of everything included.
const requestTimeout = 30 * time.Second

// newAdminClient runs `isle kubeconfig` on the server's data directory and
// builds a client from the certificate, key and CA it prints.
func newAdminClient(ctx context.Context, isle, dataDir, server string) (*apiClient, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, isle, "kubeconfig", "--data-dir", dataDir, "--server", server)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("admin client: isle kubeconfig: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(out, &kc); err != nil {
		return nil, fmt.Errorf("admin client: parse kubeconfig: %w", err)
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return nil, fmt.Errorf("admin client: kubeconfig has %d clusters and %d users, want 1 and 1", len(kc.Clusters), len(kc.Users))
	}
	var pems [3][]byte
	for i, s := range []string{kc.Users[0].User.Cert, kc.Users[0].User.Key, kc.Clusters[0].Cluster.CA} {
		if pems[i], err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("admin client: kubeconfig data field %d: %w", i, err)
		}
	}
	cert, err := tls.X509KeyPair(pems[0], pems[1])
	if err != nil {
		return nil, fmt.Errorf("admin client: client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pems[2]) {
		return nil, errors.New("admin client: kubeconfig's certificate-authority-data holds no certificate")
	}
	tr := &http.Transport{
		Proxy:               nil, // all traffic stays on 127.0.0.1
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true, // no gzip on loopback: measure the server, not compression
	}
	return &apiClient{base: server, http: &http.Client{Timeout: requestTimeout, Transport: tr}}, nil
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
