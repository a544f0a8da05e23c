package podnet

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
)

// groOn reads whether GRO is on for the link name in the calling thread's
// namespace (ETHTOOL_GGRO).
func groOn(t *testing.T, name string) bool {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	value := struct{ cmd, data uint32 }{cmd: 0x2b}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [24]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&value))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		t.Fatalf("ETHTOOL_GGRO %s: %v", name, errno)
	}
	runtime.KeepAlive(&value)
	return value.data != 0
}

// TestAttachTurnsGROOn: both ends of a pod's veth receive with GRO.
func TestAttachTurnsGROOn(t *testing.T) {
	requireRoot(t)
	b := newLAN(t).board(1)
	p := b.attach("gro")
	for _, c := range []struct{ ns, link string }{{b.ns, vethName(p.uid)}, {p.ns, podIf}} {
		var on bool
		if err := netns.Do(c.ns, func() error { on = groOn(t, c.link); return nil }); err != nil {
			t.Fatal(err)
		}
		if !on {
			t.Errorf("GRO is off on %s in %s", c.link, c.ns)
		}
	}
	if err := SetGRO("no-such-link0"); err == nil {
		t.Error("SetGRO of a link that does not exist: no error")
	}
}
