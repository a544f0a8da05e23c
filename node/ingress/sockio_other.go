//go:build !linux

package ingress

import (
	"io"
	"net"
)

// newSockIO returns the reader and the writer of the fast path for conn:
// conn itself (sockio_linux.go reads and writes sockets with raw system
// calls).
func newSockIO(conn net.Conn) (io.Reader, io.Writer) { return conn, conn }
