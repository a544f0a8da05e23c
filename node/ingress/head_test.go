package ingress

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
)

// parseRequestHead parses s as the whole of a connection's buffer.
func parseRequestHead(s string) (*reqHead, headState) {
	var h reqHead
	h.reset()
	return &h, h.parse([]byte(s))
}

func TestRequestHead(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: a\r\n"
	for _, tc := range []struct {
		name, head string
		want       headState
	}{
		{"simple", get + "\r\n", headDone},
		{"incomplete line", "GET / HTTP/1.1\r\nHost: a", headMore},
		{"incomplete CRLF", get + "\r", headMore},
		{"incomplete header", get, headMore},
		{"fields", get + "User-Agent: x\r\nAccept:*/*\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n", headDone},
		{"obs-text value", get + "X: caf\xc3\xa9\r\n\r\n", headDone},
		{"body", "POST /p?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", headDone},
		{"body at the limit", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65536\r\n\r\n", headDone},
		{"escaped path", "GET /a%2Fb%20c?x=%zz HTTP/1.1\r\nHost: a\r\n\r\n", headDone},

		// Request lines.
		{"no target", "GET\r\nHost: a\r\n\r\n", headLeave},
		{"empty line first", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", headLeave},
		{"HTTP/2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", headLeave},
		{"trailing space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", headLeave},
		{"bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"CONNECT", "CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"absolute form", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"control byte in target", "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"DEL in target", "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"bad escape", "GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},
		{"short escape", "GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", headLeave},

		// Line ends and folding.
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n", headLeave},
		{"bare LF later", get + "X: 1\n\r\n", headLeave},
		{"bare CR", get + "X: 1\r2\r\n\r\n", headLeave},
		{"obs-fold", get + "X: 1\r\n 2\r\n\r\n", headLeave},
		{"obs-fold with tab", get + "X: 1\r\n\t2\r\n\r\n", headLeave},
		{"first field folded", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", headLeave},

		// Field lines.
		{"no colon", get + "no colon\r\n\r\n", headLeave},
		{"space before colon", get + "X : 1\r\n\r\n", headLeave},
		{"empty name", get + ": 1\r\n\r\n", headLeave},
		{"bad name", get + "X(: 1\r\n\r\n", headLeave},
		{"NUL in value", get + "X: a\x00b\r\n\r\n", headLeave},
		{"DEL in value", get + "X: a\x7fb\r\n\r\n", headLeave},

		// Host.
		{"no Host", "GET / HTTP/1.1\r\n\r\n", headLeave},
		{"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", headLeave},
		{"two Hosts", get + "Host: b\r\n\r\n", headLeave},
		{"two equal Hosts", get + "host: a\r\n\r\n", headLeave},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", headLeave},
		{"bad Host byte", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", headLeave},

		// Framing: what http.Server reads otherwise, or refuses.
		{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", headLeave},
		{"two equal lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\na", headLeave},
		{"empty length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", headLeave},
		{"signed length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\na", headLeave},
		{"length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\na", headLeave},
		{"length over the limit", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", headLeave},
		{"huge length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", headLeave},
		{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", headLeave},
		{"chunked and length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", headLeave},
		{"length and chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", headLeave},
		{"empty Transfer-Encoding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", headLeave},
		{"upgrade", get + "Connection: upgrade\r\nUpgrade: websocket\r\n\r\n", headLeave},
		{"expect", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\na", headLeave},
		{"trailer", get + "Trailer: X\r\n\r\n", headLeave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, got := parseRequestHead(tc.head)
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if got == headDone {
				checkAsNetHTTP(t, []byte(tc.head), h)
			}
		})
	}
}

// checkAsNetHTTP checks that net/http reads the request header h parsed
// from buf the same way, and that http.Server would serve it: where it
// ends, the method, target, path, Host, body length, whether the
// connection closes, and the fields.
func checkAsNetHTTP(t *testing.T, buf []byte, h *reqHead) {
	t.Helper()
	br := bufio.NewReaderSize(bytes.NewReader(buf), len(buf)+16)
	req, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("net/http refuses what the fast path takes: %v", err)
	}
	if rest := len(buf) - h.size; br.Buffered() != rest {
		t.Errorf("the header ends after %d bytes, net/http says %d", h.size, len(buf)-br.Buffered())
	}
	head := buf[:h.size]
	got := []any{h.method, string(h.target.of(head)), string(h.routePath(head)), string(h.host.of(head)), h.length, h.close}
	want := []any{req.Method, req.RequestURI, req.URL.Path, req.Host, req.ContentLength, req.Close}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("method, target, path, Host, length, close: got %q, net/http %q", got, want)
	}
	if req.TransferEncoding != nil || req.Header["Upgrade"] != nil || req.Header["Expect"] != nil || req.Header["Trailer"] != nil ||
		!httpguts.ValidHostHeader(req.Host) || !strings.HasPrefix(req.RequestURI, "/") || req.Method == http.MethodConnect {
		t.Errorf("the fast path takes what it should leave to http.Server: %+v", req)
	}
	fields := http.Header{}
	for _, f := range h.fields {
		if f.kind != kindHost {
			fields.Add(string(f.name.of(head)), string(f.value.of(head)))
		}
	}
	if h.pragma && !h.cacheCtrl {
		fields.Set("Cache-Control", "no-cache")
	}
	if !reflect.DeepEqual(fields, req.Header) {
		t.Errorf("fields: got %q, net/http %q", fields, req.Header)
	}
	for k, vv := range req.Header {
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
				t.Errorf("the fast path takes a field http.Server refuses: %q: %q", k, v)
			}
		}
	}
}

// FuzzRequestHead checks that whatever request header the fast path
// takes, net/http reads the same way (so that a request cannot be read
// one way by the proxy and another by an endpoint).
func FuzzRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p?q HTTP/1.1\r\nHost: a:80\r\nContent-Length: 3\r\nConnection: x, close\r\n\r\nabc",
		"GET /%41 HTTP/1.1\r\nHost: [::1]:80\r\nPragma: no-cache\r\nTE: trailers\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		var h reqHead
		h.reset()
		if h.parse(buf) == headDone {
			checkAsNetHTTP(t, buf, &h)
		}
	})
}

func TestRequestHeadIncremental(t *testing.T) {
	// Parsing goes on where it stopped as more arrives, and a bad line
	// is seen before the header is complete (http.Server answers it at
	// once).
	full := "GET /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\r\n"
	var h reqHead
	h.reset()
	for i := range len(full) {
		if got := h.parse([]byte(full[:i])); got != headMore {
			t.Fatalf("after %d bytes: got %v, want more", i, got)
		}
	}
	if got := h.parse([]byte(full)); got != headDone || h.size != len(full) {
		t.Fatalf("whole: got %v, size %d", got, h.size)
	}
	h.reset()
	if got := h.parse([]byte("GET / HTTP/1.1\r\nbad line\r\nHost: a")); got != headLeave {
		t.Errorf("bad line in an incomplete header: got %v, want leave", got)
	}
}

func TestValidHost(t *testing.T) {
	for c := range 256 {
		s := "a" + string(rune(c)) + "b"
		if c >= 0x80 {
			s = "a" + string([]byte{byte(c)}) + "b"
		}
		if got, want := validHost([]byte(s)), httpguts.ValidHostHeader(s); got != want {
			t.Errorf("byte %#x: got %v, httpguts says %v", c, got, want)
		}
	}
}

// parseResponseHead parses s as the whole of a connection's buffer, for
// a request of method.
func parseResponseHead(s, method string) (*respHead, headState) {
	var h respHead
	return &h, h.parse([]byte(s), method)
}

func TestResponseHead(t *testing.T) {
	for _, tc := range []struct {
		name, head, method string
		want               headState
	}{
		{"simple", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", headDone},
		{"no reason", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", "GET", headDone},
		{"HEAD without length", "HTTP/1.1 200 OK\r\n\r\n", "HEAD", headDone},
		{"204", "HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n", "GET", headDone},
		{"304", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", "GET", headDone},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "GET", headDone},
		{"incomplete", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "GET", headMore},
		{"incomplete status line", "HTTP/1.1 200 O", "GET", headMore},

		{"1xx", "HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n", "GET", headLeave},
		{"101", "HTTP/1.1 101 Switching Protocols\r\n\r\n", "GET", headLeave},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"bad code", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"long code", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"code 600", "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"until close", "HTTP/1.1 200 OK\r\n\r\nbody", "GET", headLeave},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "GET", headLeave},
		{"chunked and length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "GET", headLeave},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "GET", headLeave},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "GET", headLeave},
		{"bad length on 204", "HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n", "GET", headLeave},
		{"trailer", "HTTP/1.1 200 OK\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX: 1\r\n 2\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", "GET", headLeave},
		{"bad field", "HTTP/1.1 200 OK\r\nX : 1\r\nContent-Length: 0\r\n\r\n", "GET", headLeave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, got := parseResponseHead(tc.head, tc.method)
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if got == headDone {
				checkResponseAsNetHTTP(t, []byte(tc.head), tc.method, h)
			}
		})
	}
}

// checkResponseAsNetHTTP checks that net/http reads the response header
// h parsed from buf, to a request of method, the same way.
func checkResponseAsNetHTTP(t *testing.T, buf []byte, method string, h *respHead) {
	t.Helper()
	br := bufio.NewReaderSize(bytes.NewReader(buf), len(buf)+16)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("net/http refuses what the fast path takes: %v", err)
	}
	if rest := len(buf) - h.size; br.Buffered() != rest {
		t.Errorf("the header ends after %d bytes, net/http says %d", h.size, len(buf)-br.Buffered())
	}
	length := h.length
	if h.bodiless(method) && method != http.MethodHead {
		length = 0
	}
	got := []any{h.status, length, h.close}
	want := []any{resp.StatusCode, resp.ContentLength, resp.Close}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status, length, close: got %v, net/http %v", got, want)
	}
	if resp.TransferEncoding != nil || resp.Trailer != nil {
		t.Errorf("the fast path takes what it should leave to net/http: %+v", resp)
	}
	head := buf[:h.size]
	fields := http.Header{}
	for _, f := range h.fields {
		fields.Add(string(f.name.of(head)), string(f.value.of(head)))
	}
	if h.close {
		// net/http drops Connection once it has seen close (and so
		// passes on the fields it named; the fast path does not).
		fields.Del("Connection")
	}
	if !reflect.DeepEqual(fields, resp.Header) {
		t.Errorf("fields: got %q, net/http %q", fields, resp.Header)
	}
}

// FuzzResponseHead checks that whatever response header the fast path
// takes, net/http reads the same way.
func FuzzResponseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\nConnection: close, x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, buf []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		var h respHead
		if h.parse(buf, method) == headDone {
			checkResponseAsNetHTTP(t, buf, method, &h)
		}
	})
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]fieldKind{
		"Connection": kindConnection, "KEEP-ALIVE": kindHop, "te": kindTE, "Content-Length": kindContentLength,
		"Transfer-Encoding": kindTransferEncoding, "Host": kindHost, "X-Real-IP": kindXForwarded,
		"x-forwarded-for": kindXForwardedFor, "Proxy-Authorization": kindHop, "X-Proxy-Authorization": kindOther,
		"Hosts": kindOther, "": kindOther,
	} {
		if got := kindOf([]byte(name)); got != want {
			t.Errorf("kindOf(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCloseIdle(t *testing.T) {
	ep := newPool().get("127.0.0.1:1")
	t.Cleanup(ep.close)
	now := time.Now()
	var conns []net.Conn
	for _, age := range []time.Duration{idleTimeout + time.Second, idleTimeout, idleTimeout - 5*time.Second, time.Second} {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = b.Close() })
		conns = append(conns, b)
		ep.put(&upConn{ep: ep, conn: a})
		ep.idle[len(ep.idle)-1].idleAt = now.Add(-age)
	}
	if !ep.sweeping {
		t.Error("no sweep set after put")
	}
	ep.mu.Lock()
	next := ep.closeIdle(now)
	ep.mu.Unlock()
	if next != 5*time.Second || len(ep.idle) != 2 {
		t.Errorf("got %d idle, next sweep in %v, want 2 and 5s", len(ep.idle), next)
	}
	for i, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := conn.Read(make([]byte, 1))
		if closed := err == io.EOF; closed != (i < 2) {
			t.Errorf("connection idle #%d: closed %v (%v), want %v", i, closed, err, i < 2)
		}
	}
	ep.close()
	if ep.sweeping || len(ep.idle) != 0 {
		t.Error("the endpoint's sweep or idle connections are left after close")
	}
}

func TestRequestHeadKeepsLittle(t *testing.T) {
	// A header of many fields, or a long escaped path, does not keep its
	// memory for the next request.
	h, state := parseRequestHead("GET /" + strings.Repeat("%41", 500) + " HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: 1\r\n", 500) + "\r\n")
	if state != headDone || len(h.fields) != 501 || len(h.unescaped) != 501 {
		t.Fatalf("got %v with %d fields, path %d bytes", state, len(h.fields), len(h.unescaped))
	}
	h.reset()
	if cap(h.fields) > maxKeptFields || cap(h.unescaped) > 1<<10 {
		t.Errorf("kept room for %d fields and %d path bytes", cap(h.fields), cap(h.unescaped))
	}
}
