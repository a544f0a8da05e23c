package ingress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxResponseHeaderBytes bounds the header of an endpoint's response on
// the fast path, as http.Transport's default does.
const maxResponseHeaderBytes = 1 << 20

// upConn is a keep-alive connection of the fast path to an endpoint,
// used by one request at a time and pooled by its endpoint in between.
type upConn struct {
	ep     *endpoint
	conn   net.Conn
	in     countReader // the connection, counted and bounded
	br     *bufio.Reader
	bw     *bufio.Writer
	resp   respHead  // the response being read, parsed in br's buffer
	reused bool      // it served a request before
	idleAt time.Time // when it was put with the idle ones
}

// countReader counts what is read through it, and bounds it while limit
// is non-negative.
type countReader struct {
	r     io.Reader
	n     int64 // bytes read since the count was reset
	limit int64 // bytes that may be read; negative: no bound
}

// errResponseHeaderTooLarge is a response header over
// maxResponseHeaderBytes.
var errResponseHeaderTooLarge = errors.New("response header too large")

func (c *countReader) Read(p []byte) (int, error) {
	if c.limit >= 0 {
		if c.n >= c.limit {
			return 0, errResponseHeaderTooLarge
		}
		p = p[:min(int64(len(p)), c.limit-c.n)]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// dialConn makes a new connection to the endpoint.
func (ep *endpoint) dialConn(ctx context.Context) (*upConn, error) {
	conn, err := ep.dial(ctx, "tcp", ep.addr)
	if err != nil {
		return nil, err
	}
	uc := &upConn{ep: ep, conn: conn}
	r, w := newSockIO(conn)
	uc.in.r = r
	uc.br = bufio.NewReader(&uc.in)
	uc.bw = bufio.NewWriter(w)
	return uc, nil
}

// take returns the endpoint's most recently used idle connection (the
// least likely to have been closed by the endpoint meanwhile), or a new
// one.
func (ep *endpoint) take(ctx context.Context) (*upConn, error) {
	ep.mu.Lock()
	if n := len(ep.idle); n > 0 {
		uc := ep.idle[n-1]
		ep.idle[n-1] = nil
		ep.idle = ep.idle[:n-1]
		ep.mu.Unlock()
		return uc, nil
	}
	ep.mu.Unlock()
	return ep.dialConn(ctx)
}

// put returns a connection whose exchange ended cleanly to the idle
// ones, or closes it if the endpoint is gone or has enough idle ones.
// One timer per endpoint closes those idle for idleTimeout (a timer per
// connection would be stopped and reset with every request).
func (ep *endpoint) put(uc *upConn) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.gone || len(ep.idle) >= maxIdlePerEndpoint {
		_ = uc.conn.Close()
		return
	}
	uc.reused = true
	uc.idleAt = time.Now()
	ep.idle = append(ep.idle, uc)
	switch {
	case ep.sweeper == nil:
		ep.sweeper = time.AfterFunc(idleTimeout, ep.sweep)
	case !ep.sweeping:
		ep.sweeper.Reset(idleTimeout)
	}
	ep.sweeping = true
}

// sweep closes the connections idle for idleTimeout, and sets the timer
// for the next one to be.
func (ep *endpoint) sweep() {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if next := ep.closeIdle(time.Now()); next > 0 && !ep.gone {
		ep.sweeper.Reset(next)
	} else {
		ep.sweeping = false
	}
}

// closeIdle closes the connections idle for idleTimeout at now and
// returns how long until the next one will have been; 0 if none is left.
// The idle ones are in the order they were put.
func (ep *endpoint) closeIdle(now time.Time) time.Duration {
	n := 0
	for n < len(ep.idle) && now.Sub(ep.idle[n].idleAt) >= idleTimeout {
		_ = ep.idle[n].conn.Close()
		n++
	}
	ep.idle = slices.Delete(ep.idle, 0, n)
	if len(ep.idle) == 0 {
		return 0
	}
	return idleTimeout - now.Sub(ep.idle[0].idleAt)
}

// close closes the endpoint's idle connections, of both paths; the
// connections in use are closed when their exchange ends.
func (ep *endpoint) close() {
	ep.transport.CloseIdleConnections()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.gone = true
	if ep.sweeper != nil {
		ep.sweeper.Stop()
		ep.sweeping = false
	}
	for _, uc := range ep.idle {
		_ = uc.conn.Close()
	}
	ep.idle = nil
}

// maxInfoResponses bounds the 1xx responses before the final one, as
// http.Transport does.
const maxInfoResponses = 5

// send writes the request of fc to the endpoint, its body included, and
// reads the response's header. It returns nil when the fast path parsed
// it, into uc.resp, and else the response as http.ReadResponse reads it:
// then a 1xx response other than 101 is passed to fc.writeInfo and the
// next one read.
func (uc *upConn) send(fc *fastConn) (*http.Response, error) {
	uc.in.n, uc.in.limit = 0, -1
	if err := fc.writeRequest(uc.bw); err != nil {
		return nil, err
	}
	method := fc.req.method
	for {
		buf, _ := uc.br.Peek(uc.br.Buffered())
		state := uc.resp.parse(buf, method)
		if state == headDone {
			return nil, nil
		}
		if state == headLeave || len(buf) == uc.br.Size() {
			break
		}
		if _, err := uc.br.Peek(len(buf) + 1); err != nil {
			return nil, err
		}
	}
	req := &http.Request{Method: method}
	for infos := 0; ; infos++ {
		if infos > maxInfoResponses {
			return nil, errors.New("too many 1xx responses")
		}
		uc.in.limit = uc.in.n + maxResponseHeaderBytes
		resp, err := http.ReadResponse(uc.br, req)
		uc.in.limit = -1
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("101 Switching Protocols to a request that asked for no upgrade")
		}
		if err := fc.writeInfo(resp); err != nil {
			return nil, err
		}
	}
}

// mayRetry says whether a request of method with a body of length bytes,
// which failed on uc, may be sent again on a new connection: uc was idle
// before (the endpoint may have closed it meanwhile), not a byte of a
// response came, and the request is idempotent and has no body, so that
// sending it twice does no harm.
func (uc *upConn) mayRetry(method string, length int64) bool {
	if !uc.reused || uc.in.n > 0 || length != 0 {
		return false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// isHopHeader says whether k is a header of one connection (RFC 9110,
// 7.6.1), which a proxy does not pass on, or Content-Length, which the
// fast path writes as its framing needs (as it does Transfer-Encoding).
func isHopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
		return true
	}
	return false
}

// writeHeader writes the fields of h that are not hop-by-hop. The
// headers a Connection header names are removed from h before (by
// removeConnectionHeaders).
func writeHeader(w *bufio.Writer, h http.Header) {
	for k, vv := range h {
		if isHopHeader(k) {
			continue
		}
		for _, v := range vv {
			_, _ = w.WriteString(k)
			_, _ = w.WriteString(": ")
			_, _ = w.WriteString(v)
			_, _ = w.WriteString("\r\n")
		}
	}
}

// removeConnectionHeaders removes the headers that h's Connection header
// names: they are for one connection too.
func removeConnectionHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				delete(h, http.CanonicalHeaderKey(name))
			}
		}
	}
}

// writeRequestHead writes the header of the request h, parsed in head,
// as the endpoint gets it in HTTP/1.1: the request target and Host as
// received, the end-to-end fields in their order, and the X-Forwarded-*
// and X-Real-IP fields of a client at ip on the listener's port.
// net/http's reading is kept: a Pragma: no-cache without Cache-Control
// adds Cache-Control: no-cache.
func writeRequestHead(w *bufio.Writer, head []byte, h *reqHead, ip, port string) {
	host := h.host.of(head)
	_, _ = w.WriteString(h.method)
	_ = w.WriteByte(' ')
	_, _ = w.Write(h.target.of(head))
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.Write(host)
	_, _ = w.WriteString("\r\n")
	trailers := false
	prior := 0 // X-Forwarded-For fields of the client's passed on
	for _, f := range h.fields {
		switch f.kind {
		case kindHost, kindXForwarded:
			continue
		case kindTE:
			// "TE: trailers" is the one TE a client may send through
			// a proxy: it says the client accepts trailers.
			trailers = trailers || hasTokenBytes(f.value.of(head), "trailers") && !h.named(head, f.name.of(head))
			continue
		case kindXForwardedFor:
			if ip != "" {
				if !h.named(head, f.name.of(head)) {
					prior++
				}
				continue
			}
		}
		if h.passed(head, f) {
			writeField(w, f.name.of(head), f.value.of(head))
		}
	}
	if ip != "" {
		_, _ = w.WriteString("X-Forwarded-For: ")
		if prior > 0 {
			for _, f := range h.fields {
				if f.kind == kindXForwardedFor {
					_, _ = w.Write(f.value.of(head))
					_, _ = w.WriteString(", ")
				}
			}
		}
		_, _ = w.WriteString(ip)
		_, _ = w.WriteString("\r\nX-Real-Ip: ")
		_, _ = w.WriteString(ip)
		_, _ = w.WriteString("\r\n")
	}
	_, _ = w.WriteString("X-Forwarded-Host: ")
	_, _ = w.Write(host)
	_, _ = w.WriteString("\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Port: ")
	_, _ = w.WriteString(port)
	_, _ = w.WriteString("\r\n")
	if h.pragma && !h.cacheCtrl && !h.named(head, []byte("Cache-Control")) {
		_, _ = w.WriteString("Cache-Control: no-cache\r\n")
	}
	if trailers {
		_, _ = w.WriteString("Te: trailers\r\n")
	}
	switch h.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		writeContentLength(w, h.length)
	default:
		if h.length > 0 {
			writeContentLength(w, h.length)
		}
	}
	_, _ = w.WriteString("\r\n")
}

// writeField writes a header field.
func writeField(w *bufio.Writer, name, value []byte) {
	_, _ = w.Write(name)
	_, _ = w.WriteString(": ")
	_, _ = w.Write(value)
	_, _ = w.WriteString("\r\n")
}

func writeContentLength(w *bufio.Writer, n int64) {
	_, _ = w.WriteString("Content-Length: ")
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), n, 10))
	_, _ = w.WriteString("\r\n")
}

// writeStatusLine writes the status line of code in HTTP/1.1.
func writeStatusLine(w *bufio.Writer, code int) {
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(code), 10))
	_ = w.WriteByte(' ')
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	_, _ = w.WriteString(text)
	_, _ = w.WriteString("\r\n")
}

// writeDate writes a Date header unless h has one, as http.Server does.
func writeDate(w *bufio.Writer, h http.Header) {
	if _, ok := h["Date"]; !ok {
		_, _ = w.WriteString("Date: ")
		_, _ = w.Write(time.Now().UTC().AppendFormat(w.AvailableBuffer(), http.TimeFormat))
		_, _ = w.WriteString("\r\n")
	}
}
