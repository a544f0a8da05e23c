package ingress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The fast path serves plain HTTP/1.1 requests on the HTTP listener in
// one goroutine per client connection: it reads a request, sends it over
// a pooled connection to an endpoint, reads the response and copies it
// back, with none of the hand-offs between goroutines (and far fewer of
// the allocations) of http.Server, ReverseProxy and http.Transport, which
// cost more than half of a proxied request's CPU time on a board.
// Requests it leaves to them (upgrades, Expect, chunked or large bodies,
// HTTP/1.0, anything malformed) are replayed to http.Server with the
// connection, which serves the connection from then on.

const (
	// readHeaderTimeout bounds the reading of a request's header.
	readHeaderTimeout = 10 * time.Second
	// clientIdleTimeout is how long a client's connection may wait for
	// its next request.
	clientIdleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's header (http.Server allows 4 KiB
	// more, as here).
	maxHeaderBytes = 64 << 10
	// maxFastBody is the largest request body the fast path sends. It
	// sends the whole body before reading the response; an endpoint that
	// answers early without reading a larger body could leave both sides
	// waiting, which ReverseProxy's concurrent reading and writing avoids.
	maxFastBody = 64 << 10
)

// fastServer serves the HTTP listener.
type fastServer struct {
	c       *Controller
	handoff *connQueue // to http.Server
	closing atomic.Bool
	killed  atomic.Bool // shutdown ran out of time
	// headerTimeout and idleTimeout are readHeaderTimeout and
	// clientIdleTimeout, shorter in tests.
	headerTimeout, idleTimeout time.Duration
	wg                         sync.WaitGroup // the connections' goroutines

	mu    sync.Mutex // guards the fields below
	ln    net.Listener
	conns map[*fastConn]struct{}
}

func newFastServer(c *Controller) *fastServer {
	return &fastServer{
		c:             c,
		handoff:       newConnQueue(),
		headerTimeout: readHeaderTimeout,
		idleTimeout:   clientIdleTimeout,
		conns:         make(map[*fastConn]struct{}),
	}
}

// serve accepts connections on ln until shutdown.
func (s *fastServer) serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	if s.closing.Load() {
		_ = ln.Close()
		return http.ErrServerClosed
	}
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return http.ErrServerClosed
			}
			// Out of file descriptors, say: wait for some to be freed,
			// as http.Server does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.c.log.Warn("ingress: accepting a connection failed, retrying", "addr", ln.Addr().String(), "in", backoff, "err", err)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		fc := newFastConn(s, conn)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			_ = conn.Close()
			return http.ErrServerClosed
		}
		s.conns[fc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go fc.serve()
	}
}

// shutdown stops accepting, closes the idle connections and lets the
// requests in flight finish until ctx is done; then it closes the rest.
func (s *fastServer) shutdown(ctx context.Context) {
	s.closing.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for fc := range s.conns {
		if fc.idle.Load() {
			_ = fc.conn.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	s.killed.Store(true)
	s.mu.Lock()
	for fc := range s.conns {
		fc.kill()
	}
	s.mu.Unlock()
	<-done
}

// setIdle notes whether fc waits for a request; it says false when the
// server is shutting down and fc should close instead. (Either shutdown
// sees fc idle and closes it, or fc sees the shutdown.)
func (s *fastServer) setIdle(fc *fastConn, idle bool) bool {
	fc.idle.Store(idle)
	return !s.closing.Load()
}

func (s *fastServer) forget(fc *fastConn) {
	s.mu.Lock()
	delete(s.conns, fc)
	s.mu.Unlock()
}

// fastConn is a client's connection on the fast path.
type fastConn struct {
	s          *fastServer
	conn       net.Conn
	head       headReader
	br         *bufio.Reader
	bw         *bufio.Writer
	remoteAddr string
	ip         string                 // the client's, for X-Forwarded-For; "" if unknown
	port       string                 // the listener's, for X-Forwarded-Port
	up         atomic.Pointer[upConn] // the endpoint's connection in use
	idle       atomic.Bool            // waiting for a request
}

func newFastConn(s *fastServer, conn net.Conn) *fastConn {
	fc := &fastConn{s: s, conn: conn, port: "80", remoteAddr: conn.RemoteAddr().String()}
	fc.head.conn = conn
	fc.br = bufio.NewReader(&fc.head)
	fc.bw = bufio.NewWriter(conn)
	if ip, _, err := net.SplitHostPort(fc.remoteAddr); err == nil {
		fc.ip = ip
	}
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		fc.port = strconv.Itoa(a.Port)
	}
	return fc
}

// serve serves the connection's requests until it closes, fails, or is
// handed over to http.Server.
func (fc *fastConn) serve() {
	s := fc.s
	defer s.wg.Done()
	defer s.forget(fc)
	for first := true; ; first = false {
		if !s.setIdle(fc, true) {
			break
		}
		// As with http.Server, a new connection's first request must
		// come within headerTimeout, and a later one may take
		// idleTimeout to begin.
		if first {
			_ = fc.conn.SetReadDeadline(time.Now().Add(s.headerTimeout))
		} else {
			_ = fc.conn.SetReadDeadline(time.Now().Add(s.idleTimeout))
		}
		if _, err := fc.br.Peek(1); err != nil || !s.setIdle(fc, false) {
			break
		}
		start := time.Now()
		if !first {
			_ = fc.conn.SetReadDeadline(start.Add(s.headerTimeout))
		}
		fc.head.record(fc.br)
		req, err := http.ReadRequest(fc.br)
		if err != nil && fc.head.err != nil && fc.head.err != errHeaderTooLarge {
			break // the client went away or timed out
		}
		if err != nil || !fast(req) {
			// http.Server answers what is malformed (400, 431) as it
			// would have, and serves the rest.
			s.forget(fc)
			s.handoff.hand(&replayConn{Conn: fc.conn, replay: fc.head.stop()})
			return
		}
		fc.head.stop()
		if req.ContentLength > 0 {
			// The body may take longer than the header (http.Server
			// does not bound it either); without a body the connection
			// is not read again before the next deadline is set.
			_ = fc.conn.SetReadDeadline(time.Time{})
		}
		req.RemoteAddr = fc.remoteAddr
		if !s.c.serveFast(fc, req, start) {
			break
		}
	}
	_ = fc.conn.Close()
}

// kill closes the client's connection and the endpoint's it uses.
func (fc *fastConn) kill() {
	_ = fc.conn.Close()
	if uc := fc.up.Load(); uc != nil {
		_ = uc.conn.Close()
	}
}

// use notes that fc's request uses uc, so that a shutdown that runs out
// of time can close it; it fails once the shutdown did.
func (fc *fastConn) use(uc *upConn) error {
	fc.up.Store(uc)
	if fc.s.killed.Load() {
		return errors.New("ingress: the controller is closing")
	}
	return nil
}

// fast says whether the fast path serves req: a plain HTTP/1.1 request
// in origin form with a valid Host (http.ReadRequest refuses several)
// and a small body of known length. The others go to http.Server, which
// answers a missing or bad Host with 400, and to ReverseProxy, which
// handles upgrades, Expect: 100-continue and trailers.
func fast(req *http.Request) bool {
	h := req.Header
	return req.ProtoMajor == 1 && req.ProtoMinor == 1 &&
		req.Method != http.MethodConnect &&
		strings.HasPrefix(req.RequestURI, "/") &&
		req.Host != "" && httpguts.ValidHostHeader(req.Host) &&
		req.TransferEncoding == nil && req.ContentLength >= 0 && req.ContentLength <= maxFastBody &&
		h["Upgrade"] == nil && h["Expect"] == nil && h["Trailer"] == nil
}

// serveFast routes and answers a request of the fast path, counts it,
// and says whether the connection may serve another.
func (c *Controller) serveFast(fc *fastConn, req *http.Request, start time.Time) bool {
	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	keep := !req.Close
	var status int
	switch b := c.table.Load().route(requestHost(req.Host), path); {
	case b == nil:
		status, keep = fc.answer(req, http.StatusNotFound, "404 page not found", keep)
	case b.unavailable != "":
		status, keep = fc.answer(req, http.StatusServiceUnavailable, b.unavailable, keep)
	default:
		status, keep = b.proxyFast(c.baseCtx, fc, req, keep)
	}
	c.env.metrics.observe(status, time.Since(start))
	return keep
}

// proxyFast sends req to the next endpoint in turn, passing by and trying
// endpoints as RoundTrip does, and copies the response to the client. It
// returns the response's status and whether the client's connection may
// serve another request.
func (b *backend) proxyFast(ctx context.Context, fc *fastConn, req *http.Request, keep bool) (int, bool) {
	// Headers the client names in Connection go before the proxy's own
	// are set, so that a client cannot remove those.
	removeConnectionHeaders(req.Header)
	setForwarded(req.Header, req.Header["X-Forwarded-For"], fc.ip, req.Host, "http", fc.port)
	var uc *upConn
	err := b.connect(ctx, func(ep *endpoint) error {
		var err error
		uc, err = ep.take(ctx)
		return err
	})
	var resp *http.Response
	if err == nil {
		if err = fc.use(uc); err == nil {
			resp, err = uc.send(req, fc.writeInfo)
		}
		if err != nil && uc.mayRetry(req) {
			// The endpoint closed the idle connection as the request
			// went out; a new connection gets it.
			b.env.log.Debug("ingress: idle connection to endpoint failed, trying a new one", "backend", b.name, "endpoint", uc.ep.addr, "err", err)
			_ = uc.conn.Close()
			ep := uc.ep
			if uc, err = ep.dialConn(ctx); err == nil {
				if err = fc.use(uc); err == nil {
					resp, err = uc.send(req, fc.writeInfo)
				}
			}
		}
	}
	if err != nil {
		if uc != nil {
			_ = uc.conn.Close()
		}
		fc.up.Store(nil)
		return fc.answer(req, http.StatusBadGateway, b.failure(ctx, err), keep)
	}
	if uc.ep.health.ok() {
		b.env.log.Info("ingress: endpoint answers again", "backend", b.name, "endpoint", uc.ep.addr)
	}
	upOK, clientOK := fc.writeResponse(req, resp, keep, b.env.buffers)
	fc.up.Store(nil)
	if upOK && uc.br.Buffered() == 0 {
		// Bytes after the response would be taken for the next one's.
		uc.ep.put(uc)
	} else {
		_ = uc.conn.Close()
	}
	return resp.StatusCode, clientOK
}

// writeInfo passes a 1xx response (103 Early Hints, say) to the client.
func (fc *fastConn) writeInfo(resp *http.Response) error {
	removeConnectionHeaders(resp.Header)
	writeStatusLine(fc.bw, resp.StatusCode)
	writeHeader(fc.bw, resp.Header)
	_, _ = fc.bw.WriteString("\r\n")
	return fc.bw.Flush()
}

// writeResponse writes resp to the client, copying its body as it comes
// with Content-Length, or chunked when the length is unknown (each chunk
// flushed, as ReverseProxy does), and closes the body. It says whether
// the endpoint's connection (the body read to its end) and the client's
// (if keep) may serve further requests.
func (fc *fastConn) writeResponse(req *http.Request, resp *http.Response, keep bool, buffers bufferPool) (upOK, clientOK bool) {
	defer resp.Body.Close()
	keep = keep && !fc.s.closing.Load()
	w := fc.bw
	code := resp.StatusCode
	writeStatusLine(w, code)
	removeConnectionHeaders(resp.Header)
	writeHeader(w, resp.Header)
	writeDate(w, resp.Header)
	if len(resp.Trailer) > 0 {
		_, _ = w.WriteString("Trailer: ")
		sep := ""
		for k := range resp.Trailer {
			_, _ = w.WriteString(sep)
			_, _ = w.WriteString(k)
			sep = ", "
		}
		_, _ = w.WriteString("\r\n")
	}
	bodiless := req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	chunked := false
	switch {
	case bodiless:
		if req.Method == http.MethodHead && resp.ContentLength >= 0 {
			writeContentLength(w, resp.ContentLength)
		}
	case resp.ContentLength >= 0:
		writeContentLength(w, resp.ContentLength)
	default:
		chunked = true
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if !keep {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	if !bodiless && resp.ContentLength != 0 {
		buf := buffers.Get()
		defer buffers.Put(buf)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				var werr error
				if chunked {
					_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(n), 16))
					_, _ = w.WriteString("\r\n")
					_, _ = w.Write(buf[:n])
					_, _ = w.WriteString("\r\n")
					werr = w.Flush()
				} else {
					_, werr = w.Write(buf[:n])
				}
				if werr != nil {
					return false, false // the client is gone
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				// The endpoint failed mid-body: pass on what came and
				// cut the client's connection, so that it sees the
				// answer is incomplete.
				_ = w.Flush()
				return false, false
			}
		}
	}
	if chunked {
		_, _ = w.WriteString("0\r\n")
		writeHeader(w, resp.Trailer)
		_, _ = w.WriteString("\r\n")
	}
	return !resp.Close, w.Flush() == nil && keep
}

// answer drains req's body and answers it with code and, unless msg is
// empty, a plain text body as http.Error writes it. It returns code and
// whether the connection may serve another request.
func (fc *fastConn) answer(req *http.Request, code int, msg string, keep bool) (int, bool) {
	keep = keep && !fc.s.closing.Load()
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		keep = false
	}
	w := fc.bw
	writeStatusLine(w, code)
	if msg != "" {
		msg += "\n"
		_, _ = w.WriteString("Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n")
	}
	writeDate(w, nil)
	writeContentLength(w, int64(len(msg)))
	if !keep {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	if req.Method != http.MethodHead {
		_, _ = w.WriteString(msg)
	}
	if w.Flush() != nil {
		keep = false
	}
	return code, keep
}

// errHeaderTooLarge is a request header over maxHeaderBytes.
var errHeaderTooLarge = errors.New("request header too large")

// headReader is what a client connection's bufio.Reader reads from.
// While a request's header is read, it records the bytes (for a hand-over
// to http.Server to replay) and bounds them.
type headReader struct {
	conn      net.Conn
	recording bool
	rec       []byte // read since the request began
	left      int    // bytes the header may still take
	err       error  // the last error of the connection while recording
}

// record starts recording a request that begins with what br buffers.
func (h *headReader) record(br *bufio.Reader) {
	buffered, _ := br.Peek(br.Buffered())
	if cap(h.rec) > 16<<10 {
		h.rec = nil // an unusually large header's: not kept for the connection's life
	}
	h.rec = append(h.rec[:0], buffered...)
	h.recording = true
	h.left = maxHeaderBytes + 4<<10 - len(buffered)
	h.err = nil
}

// stop ends the recording and returns what was recorded.
func (h *headReader) stop() []byte {
	h.recording = false
	return h.rec
}

func (h *headReader) Read(p []byte) (int, error) {
	if !h.recording {
		return h.conn.Read(p)
	}
	if h.left <= 0 {
		h.err = errHeaderTooLarge
		return 0, h.err
	}
	n, err := h.conn.Read(p[:min(len(p), h.left)])
	h.left -= n
	h.rec = append(h.rec, p[:n]...)
	if err != nil {
		h.err = err
	}
	return n, err
}

// replayConn is a connection handed over to http.Server: it reads the
// bytes the fast path read first.
type replayConn struct {
	net.Conn
	replay []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(p, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite ends the sending side, as http.Server does before closing a
// connection it answered a bad request on: a client still sending then
// reads the answer before the close resets the connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("ingress: close write: not a TCP connection")
}

// connQueue is the listener of http.Server: the connections the fast
// path hands over.
type connQueue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

func newConnQueue() *connQueue {
	return &connQueue{conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand passes conn to http.Server, or closes it if the server is closed.
func (q *connQueue) hand(conn net.Conn) {
	select {
	case q.conns <- conn:
	case <-q.done:
		_ = conn.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case conn := <-q.conns:
		return conn, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }
