package netns

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Create makes a new network namespace, with its loopback up, and
// bind-mounts it at path (an absolute path; its parent directories are
// made 0755). If path already holds a network namespace, Create does
// nothing: it is safe to call again after a restart. Calls for one path
// must not run concurrently.
func Create(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	switch ok, err := Exists(path); {
	case err != nil:
		return err
	case ok:
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("netns: create %s: %w", path, err)
	}
	// The mount point: an empty file, or the one a crash left unmounted.
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return fmt.Errorf("netns: create %s: %w", path, err)
		}
		f.Close()
	case err != nil:
		return fmt.Errorf("netns: create %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("netns: create %s: exists and is a %v, not a file to mount a namespace on", path, fi.Mode().Type())
	}
	op := "netns: create " + path
	err = onThread(op, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		return nil
	}, func() error {
		if err := upAndMount(path); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
	}
	return err
}

// upAndMount brings the loopback of the calling thread's network namespace
// up, then bind-mounts that namespace at path.
func upAndMount(path string) error {
	// Loopback first: a mounted namespace always has it up.
	if err := loopbackUp(); err != nil {
		return err
	}
	self := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net"
	if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s: %w", self, err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: set flags: %w", err)
	}
	return nil
}

// Delete unmounts the namespace at path (lazily: sockets and processes
// still in it keep it alive until they end) and removes the file. A path
// that does not exist is not an error.
func Delete(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	// EINVAL: not a mount point (never mounted, or already unmounted).
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: delete %s: unmount: %w", path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("netns: delete %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("netns: delete %s: is a %v, not a namespace's mount point", path, fi.Mode().Type())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("netns: delete %s: %w", path, err)
	}
	return nil
}

// Exists reports whether path holds a mounted network namespace. A missing
// path is false; a namespace of another kind (mount, pid...) is an error.
func Exists(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("netns: statfs %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		return false, nil
	}
	fd, err := open(path)
	if err != nil {
		return false, err
	}
	unix.Close(fd)
	return true, nil
}

// open opens the network namespace at path.
func open(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netns: open %s: %w", path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("netns: statfs %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("netns: %s is not a namespace (create it with netns.Create)", path)
	}
	kind, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTTY):
		// No such ioctl (user-mode emulation, as the ARM tests run under):
		// setns with CLONE_NEWNET checks the type itself.
		return fd, nil
	case err != nil:
		unix.Close(fd)
		return -1, fmt.Errorf("netns: namespace type of %s: %w", path, err)
	}
	if kind != unix.CLONE_NEWNET {
		unix.Close(fd)
		return -1, fmt.Errorf("netns: %s is a namespace but not a network one", path)
	}
	return fd, nil
}

// Do runs f on an OS thread inside the network namespace at path and
// returns f's error. The thread goes back to the agent's namespace
// afterwards; if that fails, Go discards the thread and Do returns that
// error too. Only sockets f makes itself are in the namespace, not those of
// goroutines it starts.
func Do(path string, f func() error) error {
	target, err := open(path)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	return onThread("netns: in "+path, func() error {
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter: %w", err)
		}
		return nil
	}, f)
}

// onThread runs f on a locked OS thread that enter has moved into another
// network namespace, then moves the thread back to its own namespace. It
// returns f's error as is, and its own and enter's prefixed with op. If
// that fails, the thread's goroutine ends still locked, so Go ends the
// thread too (or, for the process's main thread, never runs Go code on it
// again) instead of running goroutines in the wrong namespace.
func onThread(op string, enter, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("%s: open the thread's own namespace: %w", op, err)
			return
		}
		defer unix.Close(home)
		if err := enter(); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("%s: %w", op, err)
			return
		}
		ferr := f()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("%s: return to the agent's namespace: %w", op, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dialer returns a dial function (as net.Dialer's DialContext) whose
// sockets are made inside the network namespace at path: "tcp" and "udp"
// networks and their 4/6 variants. A host name in addr is resolved in the
// caller's namespace, as the kubelet does, and its addresses are tried in
// turn; the connections are made inside the namespace.
func Dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ips, port, err := resolve(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("netns: dial %s %s in %s: %w", network, addr, path, err)
		}
		var d net.Dialer
		var errs []error
		for _, ip := range ips {
			var c net.Conn
			err := Do(path, func() error {
				var err error
				c, err = d.DialContext(ctx, network, netip.AddrPortFrom(ip, port).String())
				return err
			})
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, fmt.Errorf("netns: dial in %s: %w", path, errors.Join(errs...))
	}
}

// resolve splits addr into its addresses and port for network.
func resolve(ctx context.Context, network, addr string) ([]netip.Addr, uint16, error) {
	var family string
	switch network {
	case "tcp", "udp":
		family = "ip"
	case "tcp4", "udp4":
		family = "ip4"
	case "tcp6", "udp6":
		family = "ip6"
	default:
		return nil, 0, fmt.Errorf("network %q not supported (want tcp or udp)", network)
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("port %q: want a number 0..65535", p)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, uint16(port), nil
	}
	if host == "" {
		return nil, 0, errors.New("no host: want an address or a name")
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, family, host)
	if err != nil {
		return nil, 0, err
	}
	return ips, uint16(port), nil
}

// checkPath rejects paths Create and Delete must not work on.
func checkPath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("netns: path %q: want a clean absolute path", path)
	}
	return nil
}
