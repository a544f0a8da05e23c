package podnet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolSetGRO is ETHTOOL_SGRO of linux/ethtool.h.
const ethtoolSetGRO = 0x2c

// SetGRO turns generic receive offload on for the link called name in the
// calling thread's network namespace. A veth then receives through NAPI
// and merges a TCP stream's segments before the bridge, the routing and
// nftables see them, as a board's Ethernet does (Linux 5.13 and later;
// older kernels refuse it, which costs only speed).
func SetGRO(name string) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("podnet: GRO of %q: name too long", name)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("podnet: GRO of %s: %w", name, err)
	}
	defer unix.Close(fd)
	value := struct{ cmd, data uint32 }{cmd: ethtoolSetGRO, data: 1}
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
		return fmt.Errorf("podnet: GRO of %s: %w", name, errno)
	}
	return nil
}
