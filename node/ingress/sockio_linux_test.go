package ingress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

func TestSockIO(t *testing.T) {
	a, b := tcpPair(t)
	ar, aw := newSockIO(a)
	if _, ok := ar.(*sockReader); !ok {
		t.Fatalf("a TCP connection's reader is a %T", ar)
	}
	br, _ := newSockIO(b)

	// A write larger than the socket buffers waits for the reader.
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	done := make(chan error, 1)
	go func() {
		n, err := aw.Write(data)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		done <- err
	}()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 3000)
	for len(got) < len(data) {
		time.Sleep(time.Microsecond) // a slow reader
		n, err := br.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-done; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes read are not those written")
	}

	// The connection's read deadline holds.
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := br.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: got %v, want a timeout", err)
	}
	_ = b.SetReadDeadline(time.Time{})

	// Closing the connection ends a read that waits.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = b.Close()
	}()
	if _, err := br.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read when the connection is closed: got %v, want net.ErrClosed", err)
	}
	if n, err := ar.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("read when the other end closed: got %d, %v, want EOF", n, err)
	}
	_ = a.Close()
	if _, err := ar.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read of a closed connection: got %v, want net.ErrClosed", err)
	}
	if _, err := aw.Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write of a closed connection: got %v, want net.ErrClosed", err)
	}
}
