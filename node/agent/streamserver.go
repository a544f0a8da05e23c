package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/atomicfile"
)

// DefaultStreamPort is the streaming server's port when Config.StreamPort
// is 0: the kubelet's.
const DefaultStreamPort = 10250

// ServingCertFile, in the data directory, holds the streaming server's
// certificate and key (PEM, 0600). It is written only when a certificate
// is issued: on the first start and at three fifths of its life
// (wire.RenewalDue).
const ServingCertFile = "node-serving.pem"

// Bounds of the exchange with the servers.
const (
	maxServingCertBytes = 64 << 10
	servingCertTimeout  = 20 * time.Second
)

// StreamTLSConfig is the TLS configuration of a streaming server: it
// serves the certificate cert returns and accepts only clients with a
// certificate of the cluster CA (caPEM) for wire.APIServerUser: the API
// servers, which proxy kubectl logs, exec and attach. Any other client's
// handshake fails. HTTP/2 is not offered: exec and attach are WebSocket
// upgrades.
func StreamTLSConfig(roots func() *x509.CertPool, cert func() *tls.Certificate) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := cert(); c != nil {
				return c, nil
			}
			return nil, errors.New("agent: streaming server: no certificate yet")
		},
		// The chain is verified in VerifyConnection, by the CAs trusted at
		// the handshake (a replacement of the CA changes them).
		ClientAuth: tls.RequireAnyClientCert,
	}
	// Runs on resumed sessions too.
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("agent: streaming server: no client certificate")
		}
		opts := x509.VerifyOptions{Roots: roots(), Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if cfg.Time != nil {
			opts.CurrentTime = cfg.Time()
		}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("agent: streaming server: client certificate: %w", err)
		}
		if cs.PeerCertificates[0].Subject.CommonName != wire.APIServerUser {
			return fmt.Errorf("agent: streaming server: client is not %s", wire.APIServerUser)
		}
		return nil
	}
	return cfg
}

// streamDefaults fills in StreamPort: DefaultStreamPort with a Stream, 0
// (nothing served, nothing reported) without.
func (c *Config) streamDefaults() error {
	switch {
	case c.Stream == nil:
		c.StreamPort = 0
	case c.StreamPort == 0:
		c.StreamPort = DefaultStreamPort
	case c.StreamPort < 0 || c.StreamPort > 65535:
		return fmt.Errorf("agent: StreamPort %d: want a TCP port, or 0 for %d", c.StreamPort, DefaultStreamPort)
	}
	return nil
}

// serveStreams starts the streaming server, if the agent has one.
func (a *Agent) serveStreams(ctx context.Context) error {
	if a.cfg.Stream == nil {
		return nil
	}
	s, err := newStreamServer(a.cfg, a.trust, a.servers.dial, a.log)
	if err != nil {
		return err
	}
	a.stream = s
	go func() {
		if err := s.run(ctx); err != nil {
			a.log.Error("agent: streaming server stopped; kubectl logs, exec and attach fail for this board", "err", err)
		}
	}()
	return nil
}

// streamServer serves Config.Stream over TLS with a certificate of the
// cluster CA for the node's name, which it gets from the servers and
// renews.
type streamServer struct {
	node, token string
	trust       *caTrust
	path        string // of ServingCertFile
	client      *http.Client
	handler     http.Handler
	lis         net.Listener
	log         *slog.Logger
	now         func() time.Time
	check       time.Duration // how often renewal is considered, at most
	reg         prometheus.Registerer

	cert atomic.Pointer[tls.Certificate]
}

// newStreamServer listens on the board's address at cfg.StreamPort (so
// that a port in use fails the agent's start); dial connects to a server.
func newStreamServer(cfg Config, trust *caTrust, dial func(ctx context.Context, network, addr string) (net.Conn, error), log *slog.Logger) (*streamServer, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	tr := &http.Transport{
		DialContext:     dial,
		TLSClientConfig: trust.clientConfig(wire.APIServerName, now),
		// A certificate a year: no connection to keep.
		DisableKeepAlives: true,
	}
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.StreamPort))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server: %w", err)
	}
	return &streamServer{
		node: cfg.Credential.Name, token: cfg.Credential.NodeToken, trust: trust,
		path:    filepath.Join(cfg.DataDir, ServingCertFile),
		client:  &http.Client{Transport: tr, Timeout: servingCertTimeout},
		handler: cfg.Stream, lis: lis, log: log, now: now, check: wire.MaxRenewalWait, reg: cfg.Registerer,
	}, nil
}

// run gets a certificate, serves until ctx ends, and renews the
// certificate when due.
func (s *streamServer) run(ctx context.Context) error {
	defer s.lis.Close()
	_ = retry(ctx, s.log, "get the streaming server's certificate", func(ctx context.Context) error {
		err := s.ensureCert(ctx)
		if c := s.cert.Load(); err != nil && c != nil && s.now().Before(c.Leaf.NotAfter) {
			s.log.Warn("agent: streaming server certificate not renewed yet; serving the current one", "err", err)
			return nil
		}
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	cfg := StreamTLSConfig(s.trust.Pool, s.cert.Load)
	cfg.Time = s.now // the API servers' client certificates, at the board's time
	if s.reg != nil {
		expiry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: wire.CertExpiryMetric, Help: wire.CertExpiryHelp,
			ConstLabels: prometheus.Labels{"certificate": wire.CertKindNode}},
			func() float64 { return s.cert.Load().Leaf.NotAfter.Sub(s.now()).Seconds() })
		if err := s.reg.Register(expiry); err != nil {
			return fmt.Errorf("agent: streaming server: certificate metric: %w", err)
		}
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		_ = srv.Close() // sessions end with the agent
	}()
	// The renewal ends with the server, before run returns: it writes the
	// certificate's file.
	rctx, stopRenewal := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		s.renew(rctx)
	}()
	defer func() {
		stopRenewal()
		<-renewed
	}()
	s.log.Info("agent: streaming server running", "addr", s.lis.Addr().String(), "certificate expires", s.cert.Load().Leaf.NotAfter)
	if err := srv.Serve(tls.NewListener(s.lis, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("agent: streaming server: %w", err)
	}
	return nil
}

// renew replaces the certificate when its renewal is due, looking every
// wire.RenewalWait and at least every s.check (a timer of months would
// miss a clock set right after boot).
func (s *streamServer) renew(ctx context.Context) {
	for {
		wait := min(wire.RenewalWait(s.cert.Load().Leaf, s.now()), s.check)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.ensureCert(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("agent: streaming server certificate not renewed; trying again later", "err", err)
		}
	}
}

// ensureCert makes s serve a certificate for the node whose renewal is not
// due: the saved one, or else a new one from the servers.
func (s *streamServer) ensureCert(ctx context.Context) error {
	cur := s.cert.Load()
	if cur == nil {
		c, err := s.load()
		switch {
		case err == nil:
			s.cert.Store(c)
			cur = c
		case !errors.Is(err, fs.ErrNotExist):
			s.log.Warn("agent: the saved streaming server certificate is not usable; asking for another", "err", err)
		}
	}
	if cur != nil && !wire.RenewalDue(cur.Leaf, s.now()) {
		return nil
	}
	c, err := s.obtain(ctx)
	if err != nil {
		return err
	}
	s.cert.Store(c)
	return nil
}

// renewNow replaces the certificate at once (its CA no longer signs).
func (s *streamServer) renewNow(ctx context.Context) error {
	c, err := s.obtain(ctx)
	if err != nil {
		return err
	}
	s.cert.Store(c)
	s.log.Info("agent: streaming server certificate of the CA that signs now", "expires", c.Leaf.NotAfter)
	return nil
}

// load reads ServingCertFile; its certificate must be the CA's for the
// node (the file may survive a new cluster or a new name).
func (s *streamServer) load() (*tls.Certificate, error) {
	b, err := os.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %s: %w", s.path, err)
	}
	if err := s.verify(pair.Leaf); err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %s: %w", s.path, err)
	}
	return &pair, nil
}

// verify checks that leaf is the CA's serving certificate for the node
// (its dates are RenewalDue's business).
func (s *streamServer) verify(leaf *x509.Certificate) error {
	if s.trust.issuer(leaf) == "" {
		return errors.New("not signed by the cluster CA")
	}
	if err := leaf.VerifyHostname(s.node); err != nil {
		return err
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return errors.New("not a serving certificate")
	}
	return nil
}

// obtain asks a server for a certificate of a new key and saves both.
func (s *streamServer) obtain(ctx context.Context) (*tls.Certificate, error) {
	csrPEM, keyPEM, err := wire.NewCSR(s.node)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+wire.APIServerName+wire.ServingCertPath, bytes.NewReader(csrPEM))
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/x-pem-file")
	req.Header.Set("User-Agent", "isle-agent/"+s.node)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxServingCertBytes))
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = string(bytes.TrimSpace(body))
		}
		return nil, fmt.Errorf("agent: streaming server certificate: the server answered %s: %s", resp.Status, e.Error)
	}
	pair, err := tls.X509KeyPair(body, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: the server's answer: %w", err)
	}
	if err := s.verify(pair.Leaf); err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: the server's answer: %w", err)
	}
	if err := atomicfile.Write(s.path, slices.Concat(body, keyPEM), 0o600); err != nil {
		return nil, fmt.Errorf("agent: streaming server certificate: %w", err)
	}
	s.log.Info("agent: streaming server certificate issued", "expires", pair.Leaf.NotAfter)
	return &pair, nil
}
