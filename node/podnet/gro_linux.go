package podnet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool commands of linux/ethtool.h.
const (
	ethtoolGetGRO = 0x2b
	ethtoolSetGRO = 0x2c
)

// SetGRO turns generic receive offload on for the link called name in the
// calling thread's network namespace. A veth then receives through NAPI
// and merges a TCP stream's segments before the bridge, the routing and
// nftables see them, as a board's Ethernet does (Linux 5.13 and later;
// older kernels refuse it, which costs only speed).
func SetGRO(name string) error {
	if _, err := ethtool(name, ethtoolSetGRO, 1); err != nil {
		return fmt.Errorf("podnet: GRO of %s: %w", name, err)
	}
	return nil
}

// ethtool runs one of ethtool's get or set commands of a value on the
// link called name and returns the value it answers.
func ethtool(name string, cmd, data uint32) (uint32, error) {
	if len(name) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("link name %q too long", name)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	value := struct{ cmd, data uint32 }{cmd: cmd, data: data}
	// struct ifreq: the name, then a pointer to the ethtool command (the
	// union is 16 bytes on 32-bit boards, 24 on 64-bit: padded to both).
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [24]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&value))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&value)
	if errno != 0 {
		return 0, errno
	}
	return value.data, nil
}
