package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rawConn is a client connection to the controller's HTTP listener that
// writes requests as given and reads the responses.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t testing.TB, c *Controller) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", c.httpAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// send writes req.
func (rc *rawConn) send(req string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.conn, req); err != nil {
		rc.t.Fatalf("writing %q: %v", req, err)
	}
}

// read reads a response to a request of method, and its body.
func (rc *rawConn) read(method string) (*http.Response, string, error) {
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), err
}

// do sends req and reads its response, which must come whole.
func (rc *rawConn) do(req string) (*http.Response, string) {
	rc.t.Helper()
	rc.send(req)
	method, _, _ := strings.Cut(req, " ")
	resp, body, err := rc.read(method)
	if err != nil {
		rc.t.Fatalf("response to %.40q: %v", req, err)
	}
	return resp, body
}

// fastConns returns how many client connections the fast path serves.
func fastConns(c *Controller) int {
	c.fast.mu.Lock()
	defer c.fast.mu.Unlock()
	return len(c.fast.conns)
}

func TestFastBadRequests(t *testing.T) {
	c := newController(t, nil)
	c.Update(webSnapshot(t, addr(backendServer(t, "web"))))
	for _, tc := range []struct {
		name, req string
		want      int
	}{
		{"no Host", "GET / HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", http.StatusBadRequest},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", http.StatusBadRequest},
		{"bad request line", "GET\r\n\r\n", http.StatusBadRequest},
		{"bad header line", "GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n", http.StatusBadRequest},
		{"bad header value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", http.StatusBadRequest},
		{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", http.StatusBadRequest},
		{"header too large", "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", maxHeaderBytes+8<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"many header lines", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: y\r\n", maxHeaderBytes/4) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, c)
			rc.send(tc.req)
			resp, _, err := rc.read("GET")
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Errorf("got %s, want %d", resp.Status, tc.want)
			}
		})
	}

	// A good request after them is answered.
	rc := dialRaw(t, c)
	if resp, body := rc.do("GET / HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 || body != "web" {
		t.Errorf("good request: got %d %q", resp.StatusCode, body)
	}
}

func TestFastKeepAlive(t *testing.T) {
	c := newController(t, nil)
	var ct connTracker
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	}))
	be.Config.ConnState = ct.hook
	be.Start()
	t.Cleanup(be.Close)
	c.Update(webSnapshot(t, addr(be)))

	rc := dialRaw(t, c)
	for i := range 5 {
		uri := fmt.Sprintf("/a%%2Fb?i=%d", i)
		resp, body := rc.do("GET " + uri + " HTTP/1.1\r\nHost: example.com\r\n\r\n")
		if resp.StatusCode != 200 || body != "GET "+uri {
			t.Errorf("request %d: got %d %q, want 200 %q (the target as sent)", i, resp.StatusCode, body, "GET "+uri)
		}
	}
	// Pipelined requests are answered in order.
	rc.send("GET /p1 HTTP/1.1\r\nHost: a\r\n\r\nGET /p2 HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"GET /p1", "GET /p2"} {
		if _, body, err := rc.read("GET"); err != nil || body != want {
			t.Errorf("pipelined: got %q, %v, want %q", body, err, want)
		}
	}
	if n := fastConns(c); n != 1 {
		t.Errorf("connections on the fast path: %d, want 1", n)
	}
	ct.mu.Lock()
	if n := len(ct.states); n != 1 {
		t.Errorf("connections to the endpoint: %d, want 1 kept alive", n)
	}
	ct.mu.Unlock()
	// A request is counted once its response went out.
	waitFor(t, "7 requests counted as 2xx", func() bool { return testutil.ToFloat64(c.env.metrics.byClass[2]) == 7 })

	// Connection: close is honored, and said.
	resp, _ := rc.do("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !resp.Close {
		t.Error("response to Connection: close does not say it closes")
	}
	if n, err := rc.br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after Connection: close: read %d, %v, want EOF", n, err)
	}
}

func TestFastHopByHopHeaders(t *testing.T) {
	c := newController(t, nil)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var seen []string
		for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Te", "X-End", "X-Real-Ip"} {
			if v := r.Header.Get(k); v != "" {
				seen = append(seen, k+"="+v)
			}
		}
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Resp-End", "1")
		_, _ = io.WriteString(w, strings.Join(seen, " "))
	}))
	t.Cleanup(be.Close)
	c.Update(webSnapshot(t, addr(be)))

	rc := dialRaw(t, c)
	// A client cannot remove the proxy's X-Real-Ip by naming it in
	// Connection.
	resp, body := rc.do("GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Hop, x-real-ip\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: x\r\nTe: trailers, gzip\r\nX-End: 1\r\n\r\n")
	if want := "Te=trailers X-End=1 X-Real-Ip=127.0.0.1"; body != want {
		t.Errorf("the endpoint got %q, want %q", body, want)
	}
	for _, k := range []string{"X-Resp-Hop", "Keep-Alive"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("the client got %s: %s, want it removed", k, v)
		}
	}
	if resp.Header.Get("X-Resp-End") != "1" || resp.Header.Get("Date") == "" {
		t.Errorf("the client got %v, want X-Resp-End and Date", resp.Header)
	}
}

func TestFastBodies(t *testing.T) {
	c := newController(t, nil)
	large := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %q %s", r.ContentLength, r.TransferEncoding, body)
		case "/large":
			w.Header().Set("Content-Length", fmt.Sprint(len(large)))
			_, _ = io.WriteString(w, large)
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			for i := 0; i < len(large); i += 100 << 10 {
				_, _ = io.WriteString(w, large[i:min(i+100<<10, len(large))])
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Sum", "ok")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(be.Close)
	c.Update(webSnapshot(t, addr(be)))

	rc := dialRaw(t, c)
	if _, body := rc.do("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"); body != `5 [] hello` {
		t.Errorf("small body: the endpoint got %q", body)
	}
	if _, body := rc.do("POST /echo HTTP/1.1\r\nHost: a\r\n\r\n"); body != `0 [] ` {
		t.Errorf("empty POST: the endpoint got %q", body)
	}
	if n := fastConns(c); n != 1 {
		t.Errorf("connections on the fast path: %d, want 1", n)
	}
	// A chunked request body goes to http.Server, with the connection.
	if _, body := rc.do("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"); body != `-1 ["chunked"] hello world` {
		t.Errorf("chunked body: the endpoint got %q", body)
	}
	if n := fastConns(c); n != 0 {
		t.Errorf("connections on the fast path after a chunked body: %d, want 0 (handed over)", n)
	}

	client := newClient(t)
	url := "http://" + c.httpAddr.String()
	// A body over maxFastBody goes to http.Server too.
	resp, err := client.Post(url+"/echo", "text/plain", strings.NewReader(large))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%d [] %s", len(large), large); string(got) != want {
		t.Errorf("large body: the endpoint got %d bytes, want %d", len(got), len(want))
	}
	for _, path := range []string{"/large", "/chunked"} {
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != large {
			t.Errorf("GET %s: got %d bytes, %v, want %d", path, len(got), err, len(large))
		}
		if path == "/chunked" && (resp.ContentLength != -1 || resp.Trailer.Get("X-Sum") != "ok") {
			t.Errorf("GET /chunked: length %d, trailer %v, want chunked with X-Sum: ok", resp.ContentLength, resp.Trailer)
		}
	}
	rc = dialRaw(t, c)
	resp, body := rc.do("HEAD /large HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp.ContentLength != int64(len(large)) || body != "" {
		t.Errorf("HEAD: length %d, body %q, want %d and none", resp.ContentLength, body, len(large))
	}
	if resp, body := rc.do("GET /empty HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("204: got %d %q", resp.StatusCode, body)
	}
	if _, body := rc.do("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok"); body != `2 [] ok` {
		t.Errorf("after HEAD and 204 on the same connection: the endpoint got %q", body)
	}
}

// rawBackend serves each connection with serve, on loopback, and counts
// the connections.
func rawBackend(t testing.TB, serve func(conn net.Conn, br *bufio.Reader)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return ln.Addr().String(), &conns
}

func TestFastEndpointClosesIdleConnection(t *testing.T) {
	c := newController(t, nil)
	// The endpoint answers one request per connection and closes it
	// without saying so, as one whose idle timeout ran out just then.
	a, conns := rawBackend(t, func(conn net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	c.Update(webSnapshot(t, a))
	rc := dialRaw(t, c)
	for i := range 3 {
		if resp, body := rc.do("GET / HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("GET %d: got %d %q, want it sent again on a new connection", i, resp.StatusCode, body)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("connections to the endpoint: %d, want 3", n)
	}
	// A POST is not sent twice: it may have been acted on.
	ep := c.pool.eps[a]
	waitFor(t, "the connection back in the pool", func() bool {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		return len(ep.idle) == 1
	})
	if resp, body := rc.do("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("POST on a connection the endpoint closed: got %d %q, want 502", resp.StatusCode, body)
	}
	if resp, body := rc.do("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("POST after: got %d %q, want 200 on a new connection", resp.StatusCode, body)
	}
}

func TestFastEndpointFailsMidBody(t *testing.T) {
	c := newController(t, nil)
	a, _ := rawBackend(t, func(conn net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
	})
	c.Update(webSnapshot(t, a))
	rc := dialRaw(t, c)
	rc.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body, err := rc.read("GET")
	if err != io.ErrUnexpectedEOF || resp.StatusCode != 200 || body != "only ten b" {
		t.Errorf("got %v %q, %v, want the 10 bytes and the connection cut", resp, body, err)
	}
}

func TestFastInfoResponses(t *testing.T) {
	c := newController(t, nil)
	a, _ := rawBackend(t, func(conn net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		hint := "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
		if req.URL.Path == "/many" {
			hint = strings.Repeat(hint, maxInfoResponses+1)
		}
		_, _ = io.WriteString(conn, hint+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	c.Update(webSnapshot(t, a))
	rc := dialRaw(t, c)
	rc.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	var got bytes.Buffer
	for !strings.HasSuffix(got.String(), "\r\n\r\nok") {
		b, err := rc.br.ReadByte()
		if err != nil {
			t.Fatalf("got %q, %v", got.String(), err)
		}
		got.WriteByte(b)
	}
	if s := got.String(); !strings.HasPrefix(s, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\n") {
		t.Errorf("got %q, want the 103 passed on before the 200", s)
	}

	// An endpoint that sends 1xx responses without end gets 502 after a
	// few.
	rc = dialRaw(t, c)
	rc.send("GET /many HTTP/1.1\r\nHost: a\r\n\r\n")
	for {
		resp, _, err := rc.read("GET")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusEarlyHints {
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("too many 1xx responses: got %d, want 502", resp.StatusCode)
			}
			break
		}
	}
}

func TestFastCloseLetsRequestsFinish(t *testing.T) {
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(arrived)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(be.Close)
	c.Update(webSnapshot(t, addr(be)))
	idle := dialRaw(t, c)
	idle.do("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	busy := dialRaw(t, c)
	busy.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-arrived
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	waitFor(t, "the idle connection closed", func() bool {
		_, err := idle.br.ReadByte()
		return err == io.EOF
	})
	close(release)
	if resp, body, err := busy.read("GET"); err != nil || body != "done" || !resp.Close {
		t.Errorf("request in flight at Close: got %q, %v, want it answered with Connection: close", body, err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestFastTimeouts(t *testing.T) {
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The pause below must outlast the header timeout and stay well
	// inside the idle one, under emulation too.
	c.fast.headerTimeout, c.fast.idleTimeout = 100*time.Millisecond, 2*time.Second
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.Update(webSnapshot(t, addr(backendServer(t, "web"))))
	// closedWithin says whether rc's connection closes within d.
	closedWithin := func(rc *rawConn, d time.Duration) bool {
		start := time.Now()
		_, err := rc.br.ReadByte()
		return err == io.EOF && time.Since(start) < d
	}
	if rc := dialRaw(t, c); !closedWithin(rc, 2*time.Second) {
		t.Error("a connection that sends nothing is not closed after the header timeout")
	}
	rc := dialRaw(t, c)
	rc.send("GET / HTTP/1.1\r\nHost: a\r\n")
	if !closedWithin(rc, 2*time.Second) {
		t.Error("a connection that sends half a header is not closed after the header timeout")
	}
	rc = dialRaw(t, c)
	rc.do("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(300 * time.Millisecond) // longer than the header timeout, shorter than the idle one
	if resp, body := rc.do("GET / HTTP/1.1\r\nHost: a\r\n\r\n"); body != "web" {
		t.Errorf("a request after a pause within the idle timeout: got %d %q", resp.StatusCode, body)
	}
	if !closedWithin(rc, 5*time.Second) {
		t.Error("an idle connection is not closed after the idle timeout")
	}
}

func TestFastCloseCutsStuckRequests(t *testing.T) {
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	a, _ := rawBackend(t, func(conn net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		close(arrived)
		<-release // never answers while the test runs
	})
	c.Update(webSnapshot(t, a))
	rc := dialRaw(t, c)
	rc.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	<-arrived
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > closeTimeout+time.Second {
		t.Errorf("Close took %v with a request stuck on its endpoint, want about %v", d, closeTimeout)
	}
	if _, err := rc.br.ReadByte(); err == nil {
		t.Error("the client's connection is still open after Close")
	}
}

// echoBackend answers with the request's method, target, body length and
// Transfer-Encoding, the fields named in its X-Show field, and its body.
func echoBackend(t testing.TB) *httptest.Server {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d %q", r.Method, r.RequestURI, r.ContentLength, r.TransferEncoding)
		for _, k := range r.Header.Values("X-Show") {
			fmt.Fprintf(w, " %s=%q", k, r.Header.Values(k))
		}
		fmt.Fprintf(w, " %s", body)
	}))
	t.Cleanup(be.Close)
	return be
}

func TestFastLeavesToHTTPServer(t *testing.T) {
	c := newController(t, nil)
	c.Update(webSnapshot(t, addr(echoBackend(t))))
	large := strings.Repeat("x", 8<<10) // over the fast path's buffer, within http.Server's limit
	for _, tc := range []struct{ name, req, want string }{
		{"obs-fold", "GET /f HTTP/1.1\r\nHost: a\r\nX-Show: X-Fold\r\nX-Fold: 1\r\n 2\r\n\r\n", `GET /f 0 [] X-Fold=["1 2"] `},
		{"bare LF", "GET /lf HTTP/1.1\nHost: a\n\n", `GET /lf 0 [] `},
		{"chunked with length", "POST /c HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", `POST /c -1 ["chunked"] hello`},
		{"equal lengths", "POST /l HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", `POST /l 2 [] ok`},
		{"large header", "GET /h HTTP/1.1\r\nHost: a\r\nX-Show: X-Large\r\nX-Large: " + large + "\r\n\r\n", `GET /h 0 [] X-Large=["` + large + `"] `},
		{"absolute form", "GET http://a/abs HTTP/1.1\r\nHost: a\r\n\r\n", `GET /abs 0 [] `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, c)
			if resp, body := rc.do(tc.req); resp.StatusCode != 200 || body != tc.want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, tc.want)
			}
			// The connection went to http.Server, which serves what
			// follows, as a request of its own.
			if resp, body := rc.do("GET /next HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 || body != `GET /next 0 [] ` {
				t.Errorf("next request: got %d %q", resp.StatusCode, body)
			}
			waitFor(t, "the connection handed over", func() bool { return fastConns(c) == 0 })
		})
	}
}

func TestFastRequestFields(t *testing.T) {
	c := newController(t, nil)
	c.Update(webSnapshot(t, addr(echoBackend(t))))
	const show = "X-Show: X-Forwarded-For\r\nX-Show: X-Forwarded-Host\r\nX-Show: X-Forwarded-Proto\r\nX-Show: X-Real-Ip\r\nX-Show: Cache-Control\r\nX-Show: X-Multi\r\nX-Show: Te\r\n"
	for _, tc := range []struct{ name, fields, want string }{
		{"forwarded", "X-Forwarded-For: 10.0.0.1\r\nx-forwarded-for: 10.0.0.2, 10.0.0.3\r\nX-Forwarded-Host: evil\r\nX-Real-IP: evil\r\n",
			`X-Forwarded-For=["10.0.0.1, 10.0.0.2, 10.0.0.3, 127.0.0.1"] X-Forwarded-Host=["a:80"] X-Forwarded-Proto=["http"] X-Real-Ip=["127.0.0.1"] Cache-Control=[] X-Multi=[] Te=[]`},
		{"forwarded named in Connection", "Connection: x-forwarded-for\r\nX-Forwarded-For: 10.0.0.1\r\n",
			`X-Forwarded-For=["127.0.0.1"] X-Forwarded-Host=["a:80"] X-Forwarded-Proto=["http"] X-Real-Ip=["127.0.0.1"] Cache-Control=[] X-Multi=[] Te=[]`},
		{"pragma", "Pragma: no-cache\r\nX-Multi: 1\r\nx-multi: 2\r\nTE: gzip, Trailers\r\n",
			`X-Forwarded-For=["127.0.0.1"] X-Forwarded-Host=["a:80"] X-Forwarded-Proto=["http"] X-Real-Ip=["127.0.0.1"] Cache-Control=["no-cache"] X-Multi=["1" "2"] Te=["trailers"]`},
		{"pragma and cache control", "Pragma: no-cache\r\nCache-Control: max-age=5\r\nTE: trailers\r\nConnection: te\r\n",
			`X-Forwarded-For=["127.0.0.1"] X-Forwarded-Host=["a:80"] X-Forwarded-Proto=["http"] X-Real-Ip=["127.0.0.1"] Cache-Control=["max-age=5"] X-Multi=[] Te=[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, c)
			resp, body := rc.do("GET /%61?q HTTP/1.1\r\nHost: a:80\r\n" + show + tc.fields + "\r\n")
			if want := "GET /%61?q 0 [] " + tc.want + " "; resp.StatusCode != 200 || body != want {
				t.Errorf("the endpoint got\n%s\nwant\n%s", body, want)
			}
			// This connection stays on the fast path (the last
			// subtest's may take a moment to be closed).
			waitFor(t, "one connection on the fast path", func() bool { return fastConns(c) == 1 })
		})
	}
}

func TestFastResponsesLeftToNetHTTP(t *testing.T) {
	c := newController(t, nil)
	a, _ := rawBackend(t, func(conn net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			switch req.URL.Path {
			case "/until-close":
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\nall of it")
				return
			case "/fold":
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nX-Fold: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok")
			case "/two-lengths":
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok")
				return
			case "/http10":
				_, _ = io.WriteString(conn, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
				return
			}
		}
	})
	c.Update(webSnapshot(t, a))
	rc := dialRaw(t, c)
	resp, body := rc.do("GET /until-close HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp.StatusCode != 200 || body != "all of it" || resp.ContentLength != -1 {
		t.Errorf("a body until close: got %d %q, length %d, want it chunked", resp.StatusCode, body, resp.ContentLength)
	}
	if resp, body := rc.do("GET /fold HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Fold") != "1 2" {
		t.Errorf("a folded field: got %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := rc.do("GET /two-lengths HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("two Content-Lengths: got %d, want 502", resp.StatusCode)
	}
	if resp, body := rc.do("GET /http10 HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("an HTTP/1.0 response: got %d %q", resp.StatusCode, body)
	}
	if n := fastConns(c); n != 1 {
		t.Errorf("connections on the fast path: %d, want 1", n)
	}
}
