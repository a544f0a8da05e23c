package ingress

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxSlowTries is how many connection attempts that time out a request
	// makes; attempts that fail at once (refused, no route: a board that
	// is gone) do not count, up to maxTries endpoints in all.
	maxSlowTries = 3
	maxTries     = 16
	// dialTimeout is how long connecting to an endpoint may take.
	dialTimeout = time.Second
	// maxIdlePerEndpoint bounds the idle connections kept to an endpoint.
	maxIdlePerEndpoint = 64
	// idleTimeout is how long an idle connection to an endpoint is kept.
	idleTimeout = 30 * time.Second
)

// proxyEnv is what the backends of all tables share.
type proxyEnv struct {
	log     *slog.Logger
	errLog  *log.Logger // ReverseProxy's, at debug level
	metrics *metrics
	buffers bufferPool
	now     func() time.Time // the clock of endpoint health
}

// newProxyEnv returns the environment of a controller that logs to log.
func newProxyEnv(log *slog.Logger) *proxyEnv {
	return &proxyEnv{
		log:     log,
		errLog:  slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		metrics: newMetrics(),
		buffers: newBufferPool(),
		now:     time.Now,
	}
}

// backend is where the requests of some routes go: a Service port's ready
// endpoints, or a 503 answer.
type backend struct {
	name        string // namespace/service:port, or "resource"
	unavailable string // non-empty: the body of the 503 answer
	eps         []*endpoint
	next        atomic.Uint32
	proxy       *httputil.ReverseProxy
	env         *proxyEnv
}

// newBackend returns the backend of the endpoints eps (at least one).
func (e *proxyEnv) newBackend(name string, eps []*endpoint) *backend {
	b := &backend{name: name, eps: eps, env: e}
	b.proxy = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    b,
		BufferPool:   e.buffers,
		ErrorLog:     e.errLog,
		ErrorHandler: b.proxyError,
	}
	return b
}

// serveHTTP answers a request routed to b.
func (b *backend) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if b.unavailable != "" {
		http.Error(w, b.unavailable, http.StatusServiceUnavailable)
		return
	}
	b.proxy.ServeHTTP(w, r)
}

// RoundTrip sends an outbound request to an endpoint, as connect picks
// them.
func (b *backend) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(b.eps) > 1 && req.Body != nil {
		// A Transport closes the body when it cannot connect; keep it
		// open for the next try. ReverseProxy closes it in the end.
		req.Body = keepOpen{req.Body}
	}
	var resp *http.Response
	err := b.connect(req.Context(), func(ep *endpoint) error {
		req.URL.Host = ep.addr
		var err error
		if resp, err = ep.transport.RoundTrip(req); err == nil && ep.health.ok() {
			b.env.log.Info("ingress: endpoint answers again", "backend", b.name, "endpoint", ep.addr)
		}
		return err
	})
	return resp, err
}

// connect calls try with the next endpoint in turn, passing by endpoints
// that could not be connected to lately (unless all are such); while try
// fails to connect it goes on with the next ones, until maxSlowTries
// attempts timed out or maxTries endpoints were tried. It returns the
// last error of try.
func (b *backend) connect(ctx context.Context, try func(*endpoint) error) error {
	tries := min(len(b.eps), maxTries)
	slow := 0
	var tried [maxTries]*endpoint
	var err error
	for i := range tries {
		ep, trial := b.pick(tried[:i])
		tried[i] = ep
		if err = try(ep); err == nil {
			return nil
		}
		if !isDialError(err) || ctx.Err() != nil {
			return err
		}
		hold, wasHealthy := ep.health.failed(b.env.now(), trial)
		if wasHealthy {
			b.env.log.Warn("ingress: connecting to endpoint failed, passing it by for a while", "backend", b.name, "endpoint", ep.addr, "hold", hold, "err", err)
		}
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			if slow++; slow == maxSlowTries {
				break
			}
		}
		if i+1 < tries {
			b.env.metrics.retries.Inc()
			b.env.log.Debug("ingress: connecting to endpoint failed, trying another", "backend", b.name, "endpoint", ep.addr, "err", err)
		}
	}
	return err
}

// pick returns the next endpoint in turn that a request has not tried,
// passing by held ones unless every untried endpoint is held; trial says
// whether the request is a held endpoint's trial. Only a first try may be
// a trial, so that a request whose trial fails still has tries left for
// the endpoints that answer. The endpoints passed by count as turns
// taken, so requests spread evenly over the others.
func (b *backend) pick(tried []*endpoint) (ep *endpoint, trial bool) {
	n := uint32(len(b.eps))
	start := b.next.Add(1) - 1
	fallback := n
	for i := range n {
		ep := b.eps[(start+i)%n]
		if slices.Contains(tried, ep) {
			continue
		}
		held, trial := ep.health.held(b.env.now, len(tried) == 0)
		if !held {
			b.passedBy(i)
			return ep, trial
		}
		fallback = min(fallback, i)
	}
	if fallback == n {
		panic("ingress: pick: every endpoint tried") // RoundTrip tries at most len(b.eps)
	}
	b.passedBy(fallback)
	return b.eps[(start+fallback)%n], false
}

// passedBy counts the endpoints a pick passed by as turns taken.
func (b *backend) passedBy(n uint32) {
	if n > 0 {
		b.next.Add(n)
	}
}

// isDialError says whether err means a connection could not be made, so
// nothing of the request was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isTimeout says whether err is a timeout (a connection attempt that got
// no answer).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// keepOpen is a request body whose Close does nothing.
type keepOpen struct{ io.Reader }

func (keepOpen) Close() error { return nil }

// proxyError answers a request that got no response from the endpoints.
func (b *backend) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if msg := b.failure(r.Context(), err); msg != "" {
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusBadGateway)
}

// failure notes a request that got no response from the endpoints, with
// the context ctx, and returns the body of its 502 answer: empty when the
// client went away or the controller is closing.
func (b *backend) failure(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		b.env.log.Debug("ingress: request canceled", "backend", b.name, "err", err)
		return ""
	}
	b.env.metrics.upstreamErrors.Inc()
	b.env.log.Debug("ingress: upstream error", "backend", b.name, "err", err)
	return "502 Bad Gateway: no response from backend " + b.name
}

// rewrite makes the outbound request: the URL is the inbound one (the
// endpoint's address is filled in by RoundTrip), Host is unchanged, and
// the X-Forwarded-* and X-Real-IP headers are set.
func rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	out.URL.Scheme = "http"
	ip, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		ip = ""
	}
	proto, port := "http", "80"
	if in.TLS != nil {
		proto, port = "https", "443"
	}
	if a, ok := in.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		port = strconv.Itoa(a.Port)
	}
	setForwarded(out.Header, in.Header["X-Forwarded-For"], ip, in.Host, proto, port)
}

// setForwarded sets the X-Forwarded-* and X-Real-IP headers in h, of a
// request for host from the client ip ("" if unknown) whose
// X-Forwarded-For values were prior, which came in by proto on port.
func setForwarded(h http.Header, prior []string, ip, host, proto, port string) {
	if ip != "" {
		xff := ip
		if len(prior) > 0 {
			xff = strings.Join(prior, ", ") + ", " + ip
		}
		h["X-Forwarded-For"] = []string{xff}
		h["X-Real-Ip"] = []string{ip}
	} else {
		delete(h, "X-Real-Ip")
	}
	h["X-Forwarded-Host"] = []string{host}
	h["X-Forwarded-Proto"] = []string{proto}
	h["X-Forwarded-Port"] = []string{port}
}

// endpoint is one address:port of a pod, with its own connection pools
// (of ReverseProxy's Transport, and of the fast path) and health.
type endpoint struct {
	addr      string
	dial      dialFunc // with dialTimeout
	transport *http.Transport
	health    health

	mu       sync.Mutex  // guards the fields below
	idle     []*upConn   // the fast path's, most recently used last
	sweeper  *time.Timer // closes the idle ones that were so for idleTimeout (upstream.go)
	sweeping bool        // sweeper is set
	gone     bool        // dropped by an Update, or the controller closed
}

// dialFunc connects to an address, as net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// pool holds the endpoints of the current table across Updates, so their
// connections and health are kept. Only Update uses it, under its lock.
type pool struct {
	dial dialFunc // of new endpoints, with dialTimeout added
	eps  map[string]*endpoint
	used map[string]bool // endpoints taken by the table being built
}

func newPool() *pool {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return &pool{dial: d.DialContext, eps: make(map[string]*endpoint), used: make(map[string]bool)}
}

// get returns the endpoint of addr, making it if new.
func (p *pool) get(addr string) *endpoint {
	p.used[addr] = true
	if ep := p.eps[addr]; ep != nil {
		return ep
	}
	dial := p.dial
	ep := &endpoint{addr: addr, dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		return dial(ctx, network, addr)
	}}
	ep.transport = &http.Transport{
		DialContext:           ep.dial,
		MaxIdleConnsPerHost:   maxIdlePerEndpoint,
		IdleConnTimeout:       idleTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	p.eps[addr] = ep
	return ep
}

// sweep drops the endpoints the last built table did not take, with
// their health, and closes their idle connections; connections still in
// use are closed instead of going idle when their request ends.
func (p *pool) sweep() {
	for addr, ep := range p.eps {
		if !p.used[addr] {
			ep.close()
			delete(p.eps, addr)
		}
	}
	clear(p.used)
}

// closeAll closes the idle connections of every endpoint, and those in
// use when their request ends.
func (p *pool) closeAll() {
	for _, ep := range p.eps {
		ep.close()
	}
}

// bufferSize is the size of the buffers responses are copied with.
const bufferSize = 32 << 10

// bufferPool lends ReverseProxy copy buffers. It pools array pointers so
// that Put does not allocate.
type bufferPool struct{ p *sync.Pool }

func newBufferPool() bufferPool {
	return bufferPool{&sync.Pool{New: func() any { return new([bufferSize]byte) }}}
}

func (b bufferPool) Get() []byte { return b.p.Get().(*[bufferSize]byte)[:] }

func (b bufferPool) Put(buf []byte) {
	if cap(buf) == bufferSize {
		b.p.Put((*[bufferSize]byte)(buf[:bufferSize]))
	}
}
