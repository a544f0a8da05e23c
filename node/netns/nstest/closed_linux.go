package nstest

import (
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// ClosedAddr returns a loopback TCP address nothing listens on: a port
// bound without listening, held until the test ends. Connects to it are
// refused, and no listener is given it, as it may be a port closed at
// once (the test's own backends, kubectl's, another test process's).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
}
