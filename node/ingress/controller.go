package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// closeTimeout is how long Close lets requests in flight finish.
const closeTimeout = 2 * time.Second

// Snapshot is the state of the cluster a routing table is built from.
// Update only reads it.
type Snapshot struct {
	Ingresses []*networkingv1.Ingress
	Classes   []*networkingv1.IngressClass
	Services  []*corev1.Service
	Slices    []*discoveryv1.EndpointSlice
	Secrets   []*corev1.Secret // TLS secrets (type kubernetes.io/tls)
}

// Controller is a board's Ingress controller.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	env      *proxyEnv
	table    atomic.Pointer[table]
	fallback *tls.Certificate
	handler  http.Handler
	fast     *fastServer  // the HTTP listener's
	srv      *http.Server // the HTTPS listener's, and what fast hands over
	baseCtx  context.Context
	cancel   context.CancelFunc

	updateMu sync.Mutex // serializes Update; guards the fields below
	pool     *pool
	certs    *certCache
	problems map[string]bool // the last Update's

	mu        sync.Mutex // guards the fields below
	started   bool
	closed    bool
	httpAddr  net.Addr // bound by Start
	httpsAddr net.Addr
	serving   sync.WaitGroup
}

// New returns a Controller that routes nothing until the first Update and
// listens from Start on.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	fallback, err := fallbackCertificate(time.Now())
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Logger,
		fallback: fallback,
		pool:     newPool(),
		certs:    newCertCache(),
		problems: make(map[string]bool),
		env:      newProxyEnv(cfg.Logger),
	}
	c.table.Store(&table{})
	c.handler = http.HandlerFunc(c.serveHTTP)
	c.fast = newFastServer(c)
	c.baseCtx, c.cancel = context.WithCancel(context.Background())
	c.srv = &http.Server{
		Handler:           c.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       clientIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          c.env.errLog,
		BaseContext:       func(net.Listener) context.Context { return c.baseCtx },
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: c.getCertificate,
		},
		// HTTP/1.1 only: no HTTP/2 over TLS.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	return c, nil
}

// Start listens on HTTPAddr and HTTPSAddr and serves both in the
// background until Close.
func (c *Controller) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return errors.New("ingress: start: already started or closed")
	}
	hl, err := net.Listen("tcp", c.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("ingress: listen on HTTPAddr %s: %w", c.cfg.HTTPAddr, err)
	}
	sl, err := net.Listen("tcp", c.cfg.HTTPSAddr)
	if err != nil {
		_ = hl.Close()
		return fmt.Errorf("ingress: listen on HTTPSAddr %s: %w", c.cfg.HTTPSAddr, err)
	}
	c.started = true
	c.httpAddr, c.httpsAddr = hl.Addr(), sl.Addr()
	c.fast.handoff.addr = hl.Addr()
	c.serving.Add(3)
	go c.serve(hl, func() error { return c.fast.serve(hl) })
	go c.serve(hl, func() error { return c.srv.Serve(c.fast.handoff) })
	go c.serve(sl, func() error { return c.srv.ServeTLS(sl, "", "") })
	c.log.Info("ingress: serving", "http", c.httpAddr.String(), "https", c.httpsAddr.String())
	return nil
}

func (c *Controller) serve(ln net.Listener, serve func() error) {
	defer c.serving.Done()
	if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		c.log.Error("ingress: serving stopped", "addr", ln.Addr().String(), "err", err)
	}
}

// Update builds the routing table of s and swaps it in. Requests in flight
// finish with the table they started with. Problems with the objects of s
// are logged when they first appear, and the parts concerned skipped.
func (c *Controller) Update(s Snapshot) {
	c.updateMu.Lock()
	defer c.updateMu.Unlock()
	t, problems := build(s, c.env, c.pool, c.certs)
	c.table.Store(t)
	c.pool.sweep()
	c.certs.sweep()
	now := make(map[string]bool, len(problems))
	for _, p := range problems {
		if !c.problems[p] && !now[p] {
			c.log.Warn("ingress: skipped part of the snapshot", "problem", p)
		}
		now[p] = true
	}
	c.problems = now
}

// Handler returns the handler that routes and proxies requests, as the
// listeners use it.
func (c *Controller) Handler() http.Handler { return c.handler }

// Collector returns the controller's metrics for the caller to register:
// requests by status class, upstream errors, retries and request latency.
func (c *Controller) Collector() prometheus.Collector { return c.env.metrics }

// Close stops the listeners, lets requests in flight finish for a short
// while, then cuts the rest (upgraded connections included).
func (c *Controller) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	fastDone := make(chan struct{})
	go func() {
		c.fast.shutdown(ctx)
		close(fastDone)
	}()
	err := c.srv.Shutdown(ctx)
	<-fastDone
	c.cancel()
	if err != nil {
		err = c.srv.Close()
	}
	c.serving.Wait()
	c.updateMu.Lock()
	c.pool.closeAll()
	c.updateMu.Unlock()
	if err != nil {
		return fmt.Errorf("ingress: close: %w", err)
	}
	return nil
}

// serveHTTP routes a request and counts it.
func (c *Controller) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		c.env.metrics.observe(status, time.Since(start))
	}()
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	b := route(c.table.Load(), requestHost(r.Host), path)
	if b == nil {
		http.Error(sw, "404 page not found", http.StatusNotFound)
		return
	}
	b.serveHTTP(sw, r)
}

// getCertificate chooses the certificate of a TLS handshake by SNI.
func (c *Controller) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if cert := c.table.Load().certificate(name); cert != nil {
		return cert, nil
	}
	return c.fallback, nil
}
