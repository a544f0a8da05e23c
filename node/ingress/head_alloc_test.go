package ingress

import (
	"bytes"
	"log/slog"
	"net"
	"testing"
)

// readUntil reads from conn into buf until what was read ends with end,
// and returns it; it allocates nothing.
func readUntil(conn net.Conn, buf []byte, end []byte) ([]byte, error) {
	n := 0
	for !bytes.HasSuffix(buf[:n], end) {
		if n == len(buf) {
			return nil, errShortBuffer
		}
		m, err := conn.Read(buf[n:])
		if err != nil {
			return nil, err
		}
		n += m
	}
	return buf[:n], nil
}

var errShortBuffer = net.UnknownNetworkError("buffer too short")

// TestFastNoAllocations checks that a request through the fast path
// allocates nothing once its connections are made: the client and the
// endpoint here allocate nothing either.
func TestFastNoAllocations(t *testing.T) {
	c := newController(t, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
				for {
					if _, err := readUntil(conn, buf, []byte("\r\n\r\n")); err != nil {
						return
					}
					if _, err := conn.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	c.Update(webSnapshot(t, ln.Addr().String()))

	conn, err := net.Dial("tcp", c.httpAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req := []byte("GET /hello%21?x=1 HTTP/1.1\r\nHost: Example.com:80\r\nUser-Agent: test\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n")
	buf := make([]byte, 4096)
	var failed error
	do := func() {
		if _, err := conn.Write(req); err != nil {
			failed = err
			return
		}
		got, err := readUntil(conn, buf, []byte("\r\n\r\nhello"))
		if err != nil {
			failed = err
			return
		}
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) {
			failed = net.UnknownNetworkError("unexpected response " + string(got))
		}
	}
	do() // connections made, the Host's key kept
	if n := testing.AllocsPerRun(200, do); n > 0 {
		t.Errorf("allocations per request: %v, want 0", n)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}
