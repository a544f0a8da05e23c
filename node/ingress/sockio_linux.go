package ingress

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// newSockIO returns the reader and the writer of the fast path for conn.
// For a socket they read and write with raw system calls, which do not
// tell the scheduler: on a non-blocking socket they never sleep, and the
// scheduler's work around each call (handing the P to another thread
// when a write through the network stack takes a few tens of µs, waking
// sysmon and threads for it) cost more CPU time than the calls' own work
// in make bench-traffic. They wait for the socket as net.Conn does, with
// its deadlines, and may be used by one goroutine at a time each.
func newSockIO(conn net.Conn) (io.Reader, io.Writer) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn, conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn, conn
	}
	r, w := &sockReader{rc: rc}, &sockWriter{rc: rc}
	r.fn, w.fn = r.read, w.write
	return r, w
}

// sockReader reads a socket.
type sockReader struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // r.read, made once
	p   []byte
	n   int
	err error
}

func (r *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	if err := r.rc.Read(r.fn); err != nil {
		return 0, err // the deadline passed, or the connection was closed
	}
	r.p = nil
	return r.n, r.err
}

// read makes one read, or says false if there is nothing to read yet.
func (r *sockReader) read(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch errno {
		case 0:
			if r.n = int(n); n == 0 {
				r.err = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.err = os.NewSyscallError("read", errno)
		return true
	}
}

// sockWriter writes a socket.
type sockWriter struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // w.write, made once
	p   []byte
	n   int
	err error
}

func (w *sockWriter) Write(p []byte) (int, error) {
	w.p, w.n, w.err = p, 0, nil
	if err := w.rc.Write(w.fn); err != nil {
		return w.n, err
	}
	w.p = nil
	return w.n, w.err
}

// write writes what is left of w.p, or says false if the socket's buffer
// is full.
func (w *sockWriter) write(fd uintptr) bool {
	for w.n < len(w.p) {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.p[w.n])), uintptr(len(w.p)-w.n))
		switch errno {
		case 0:
			w.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = os.NewSyscallError("write", errno)
			return true
		}
	}
	return true
}
