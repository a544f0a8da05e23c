package ingress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The fast path serves plain HTTP/1.1 requests on the HTTP listener in
// one goroutine per client connection: it reads a request, sends it over
// a pooled connection to an endpoint, reads the response and copies it
// back, with none of the hand-offs between goroutines of http.Server,
// ReverseProxy and http.Transport, which cost more than half of a
// proxied request's CPU time on a board, and no allocation: headers are
// parsed in place in the connections' buffers (head.go) and the sockets
// read and written with raw system calls (sockio_linux.go). Requests it
// leaves to net/http (upgrades, Expect, chunked or large bodies, headers
// over its 4 KiB buffer, HTTP/1.0, anything malformed or unusual) are
// replayed to http.Server with the connection, which serves the
// connection from then on.

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
	br         *bufio.Reader
	bw         *bufio.Writer
	req        reqHead // the request being served, in br's buffer
	remoteAddr string
	ip         string                 // the client's, for X-Forwarded-For; "" if unknown
	port       string                 // the listener's, for X-Forwarded-Port
	host       string                 // the last request's Host
	hostKey    string                 // and requestHost of it
	up         atomic.Pointer[upConn] // the endpoint's connection in use
	idle       atomic.Bool            // waiting for a request
}

func newFastConn(s *fastServer, conn net.Conn) *fastConn {
	fc := &fastConn{s: s, conn: conn, port: "80", remoteAddr: conn.RemoteAddr().String()}
	r, w := newSockIO(conn)
	fc.br = bufio.NewReader(r)
	fc.bw = bufio.NewWriter(w)
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
		// idleTimeout to begin (and headerTimeout from then on, see
		// readHead).
		if first {
			_ = fc.conn.SetReadDeadline(time.Now().Add(s.headerTimeout))
		} else {
			_ = fc.conn.SetReadDeadline(time.Now().Add(s.idleTimeout))
		}
		if _, err := fc.br.Peek(1); err != nil || !s.setIdle(fc, false) {
			break
		}
		start := time.Now()
		state, err := fc.readHead(start, first)
		if err != nil {
			break // the client went away or timed out
		}
		if state == headLeave {
			// http.Server answers what is malformed (400, 431) as it
			// would have, and serves the rest. Nothing of the request
			// was taken from br yet.
			buffered, _ := fc.br.Peek(fc.br.Buffered())
			s.forget(fc)
			s.handoff.hand(&replayConn{Conn: fc.conn, replay: bytes.Clone(buffered)})
			return
		}
		if fc.req.length > 0 && fc.br.Buffered() < fc.req.size+int(fc.req.length) {
			// The body may take longer than the header (http.Server
			// does not bound it either); without a body the connection
			// is not read again before the next deadline is set.
			_ = fc.conn.SetReadDeadline(time.Time{})
		}
		if !s.c.serveFast(fc, start) {
			break
		}
	}
	_ = fc.conn.Close()
}

// readHead parses the header of the next request, which has begun to
// arrive, into fc.req, reading until it is complete (within headerTimeout
// of start) but leaving it in fc.br. It returns headLeave for a request
// that is not for the fast path (with all that came of it still in
// fc.br), and an error if the connection failed first.
func (fc *fastConn) readHead(start time.Time, first bool) (headState, error) {
	h := &fc.req
	h.reset()
	deadline := first // the header's is set
	for {
		buf, _ := fc.br.Peek(fc.br.Buffered())
		if state := h.parse(buf); state != headMore {
			return state, nil
		}
		if len(buf) == fc.br.Size() {
			return headLeave, nil // a header larger than the fast path takes
		}
		if !deadline {
			_ = fc.conn.SetReadDeadline(start.Add(fc.s.headerTimeout))
			deadline = true
		}
		if _, err := fc.br.Peek(len(buf) + 1); err != nil {
			return headMore, err
		}
	}
}

// head returns the request's header, while it is in fc.br.
func (fc *fastConn) head() []byte {
	head, _ := fc.br.Peek(fc.req.size)
	return head
}

// writeRequest writes the request to w as the endpoint gets it, the body
// included, and flushes w.
func (fc *fastConn) writeRequest(w *bufio.Writer) error {
	h := &fc.req
	writeRequestHead(w, fc.head(), h, fc.ip, fc.port)
	if h.length > 0 {
		// A request with a body is not sent twice (see mayRetry): its
		// header may go.
		_, _ = fc.br.Discard(h.size)
		h.consumed = true
		for h.bodyLeft = h.length; h.bodyLeft > 0; {
			if fc.br.Buffered() == 0 {
				if _, err := fc.br.Peek(1); err != nil {
					return fmt.Errorf("read the request body: %w", err)
				}
			}
			p, _ := fc.br.Peek(int(min(h.bodyLeft, int64(fc.br.Buffered()))))
			if _, err := w.Write(p); err != nil {
				return err
			}
			_, _ = fc.br.Discard(len(p))
			h.bodyLeft -= int64(len(p))
		}
	}
	return w.Flush()
}

// skipRequest takes what is left of the request from fc.br.
func (fc *fastConn) skipRequest() error {
	h := &fc.req
	if !h.consumed {
		_, _ = fc.br.Discard(h.size)
		h.consumed, h.bodyLeft = true, h.length
	}
	n, err := fc.br.Discard(int(h.bodyLeft))
	h.bodyLeft -= int64(n)
	return err
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

// serveFast routes and answers a request of the fast path, counts it,
// and says whether the connection may serve another.
func (c *Controller) serveFast(fc *fastConn, start time.Time) bool {
	h := &fc.req
	head := fc.head()
	if host := h.host.of(head); string(host) != fc.host {
		fc.host = string(host)
		fc.hostKey = requestHost(fc.host)
	}
	keep := !h.close
	var status int
	switch b := route(c.table.Load(), fc.hostKey, h.routePath(head)); {
	case b == nil:
		status, keep = fc.answer(http.StatusNotFound, "404 page not found", keep)
	case b.unavailable != "":
		status, keep = fc.answer(http.StatusServiceUnavailable, b.unavailable, keep)
	default:
		status, keep = b.proxyFast(c.baseCtx, fc, keep)
	}
	c.env.metrics.observe(status, time.Since(start))
	return keep
}

// proxyFast sends the request to the next endpoint in turn, passing by
// and trying endpoints as RoundTrip does, and copies the response to the
// client. It returns the response's status and whether the client's
// connection may serve another request.
func (b *backend) proxyFast(ctx context.Context, fc *fastConn, keep bool) (int, bool) {
	var uc *upConn
	err := b.connect(ctx, func(ep *endpoint) error {
		var err error
		uc, err = ep.take(ctx)
		return err
	})
	var resp *http.Response // if the fast path does not read the response
	if err == nil {
		if err = fc.use(uc); err == nil {
			resp, err = uc.send(fc)
		}
		if err != nil && uc.mayRetry(fc.req.method, fc.req.length) {
			// The endpoint closed the idle connection as the request
			// went out; a new connection gets it.
			b.env.log.Debug("ingress: idle connection to endpoint failed, trying a new one", "backend", b.name, "endpoint", uc.ep.addr, "err", err)
			_ = uc.conn.Close()
			ep := uc.ep
			if uc, err = ep.dialConn(ctx); err == nil {
				if err = fc.use(uc); err == nil {
					resp, err = uc.send(fc)
				}
			}
		}
	}
	if err != nil {
		if uc != nil {
			_ = uc.conn.Close()
		}
		fc.up.Store(nil)
		return fc.answer(http.StatusBadGateway, b.failure(ctx, err), keep)
	}
	if uc.ep.health.ok() {
		b.env.log.Info("ingress: endpoint answers again", "backend", b.name, "endpoint", uc.ep.addr)
	}
	var status int
	var upOK, clientOK bool
	if resp == nil {
		status = uc.resp.status
		upOK, clientOK = fc.writeFastResponse(uc, keep, b.env.buffers)
	} else {
		status = resp.StatusCode
		upOK, clientOK = fc.writeResponse(resp, keep, b.env.buffers)
	}
	fc.up.Store(nil)
	if upOK && uc.br.Buffered() == 0 {
		// Bytes after the response would be taken for the next one's.
		uc.ep.put(uc)
	} else {
		_ = uc.conn.Close()
	}
	if clientOK && fc.skipRequest() != nil {
		clientOK = false
	}
	return status, clientOK
}

// writeInfo passes a 1xx response (103 Early Hints, say) to the client.
func (fc *fastConn) writeInfo(resp *http.Response) error {
	removeConnectionHeaders(resp.Header)
	writeStatusLine(fc.bw, resp.StatusCode)
	writeHeader(fc.bw, resp.Header)
	_, _ = fc.bw.WriteString("\r\n")
	return fc.bw.Flush()
}

// writeFastResponse writes the response of uc that the fast path parsed
// (uc.resp) to the client, copying its body of Content-Length bytes. It
// says whether the endpoint's connection (the body read to its end) and
// the client's (if keep) may serve further requests.
func (fc *fastConn) writeFastResponse(uc *upConn, keep bool, buffers bufferPool) (upOK, clientOK bool) {
	keep = keep && !fc.s.closing.Load()
	h := &uc.resp
	head, _ := uc.br.Peek(h.size)
	w := fc.bw
	writeStatusLine(w, h.status)
	date := false
	for _, f := range h.fields {
		if h.passed(head, f) {
			date = date || f.kind == kindDate
			writeField(w, f.name.of(head), f.value.of(head))
		}
	}
	if !date {
		writeDate(w, nil)
	}
	method := fc.req.method
	bodiless := h.bodiless(method)
	if !bodiless || method == http.MethodHead && h.length >= 0 {
		writeContentLength(w, h.length)
	}
	if !keep {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	_, _ = uc.br.Discard(h.size)
	if !bodiless && h.length > 0 {
		if !copyBody(w, uc.br, h.length, buffers) {
			return false, false
		}
	}
	return !h.close, w.Flush() == nil && keep
}

// copyBody copies a body of n bytes from r to the client's w. If either
// side fails, it passes on what came and says false: the client's
// connection is to be cut, so that it sees the answer is incomplete.
func copyBody(w *bufio.Writer, r *bufio.Reader, n int64, buffers bufferPool) bool {
	if int64(r.Buffered()) >= n {
		p, _ := r.Peek(int(n))
		_, err := w.Write(p)
		_, _ = r.Discard(int(n))
		return err == nil
	}
	buf := buffers.Get()
	defer buffers.Put(buf)
	for n > 0 {
		m, err := r.Read(buf[:min(n, int64(len(buf)))])
		if _, werr := w.Write(buf[:m]); werr != nil {
			return false
		}
		n -= int64(m)
		if err != nil && n > 0 {
			_ = w.Flush()
			return false
		}
	}
	return true
}

// writeResponse writes resp, which http.ReadResponse read, to the client,
// copying its body as it comes with Content-Length, or chunked when the
// length is unknown (each chunk flushed, as ReverseProxy does), and
// closes the body. It says whether the endpoint's connection (the body
// read to its end) and the client's (if keep) may serve further requests.
func (fc *fastConn) writeResponse(resp *http.Response, keep bool, buffers bufferPool) (upOK, clientOK bool) {
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
	method := fc.req.method
	bodiless := method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	chunked := false
	switch {
	case bodiless:
		if method == http.MethodHead && resp.ContentLength >= 0 {
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

// answer takes the request's body and answers it with code and, unless
// msg is empty, a plain text body as http.Error writes it. It returns
// code and whether the connection may serve another request.
func (fc *fastConn) answer(code int, msg string, keep bool) (int, bool) {
	keep = keep && !fc.s.closing.Load()
	if err := fc.skipRequest(); err != nil {
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
	if fc.req.method != http.MethodHead {
		_, _ = w.WriteString(msg)
	}
	if w.Flush() != nil {
		keep = false
	}
	return code, keep
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
