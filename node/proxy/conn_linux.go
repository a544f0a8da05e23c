package proxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// transactionBuffer is the size of the buffers of the netlink socket a
// transaction goes through. A transaction is sent as one message, which
// must fit the send buffer, and the kernel acknowledges each of its parts
// (a chain, a rule, a set...), acknowledgements that must all fit the
// receive buffer before the library reads them. The kernel's default of
// about 200 KiB holds a few hundred parts: a full write of a table with a
// hundred endpoints is more. Only what is used is allocated, and freed
// once read.
const transactionBuffer = 32 << 20

// bigBuffers raises the socket's buffers to transactionBuffer (as root;
// else as far as net.core.[rw]mem_max allow). It is an
// nftables.SockOption: C is the library's netlink connection, left to
// inference so that this package needs no netlink library of its own.
func bigBuffers[C syscall.Conn](c C) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) {
		for _, opt := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[0], transactionBuffer) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[1], transactionBuffer)
			}
		}
	})
}
