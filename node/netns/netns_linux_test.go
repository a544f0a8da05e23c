package netns

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireRoot skips (developer machine) or fails (CI) a test that needs root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skip("needs root: creates network namespaces")
	}
	t.Fatal("needs root: creates network namespaces (CI must run as root)")
}

// newNS creates a namespace under a temporary directory and deletes it at
// the end of the test (before the directory's own cleanup).
func newNS(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	path := filepath.Join(t.TempDir(), "netns", "pod")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Delete(path); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return path
}

// inode is the inode number of path (for a namespace: its identity).
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// mounts counts the mounts at path in /proc/self/mountinfo.
func mounts(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == path {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// serve accepts connections on l and writes "ns\n" to each.
func serve(t *testing.T, l net.Listener) {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ns\n"))
			c.Close()
		}
	}()
}

func TestCreateLoopbackIsolated(t *testing.T) {
	path := newNS(t)
	if ok, err := Exists(path); err != nil || !ok {
		t.Fatalf("Exists(%s) = %v, %v; want true", path, ok, err)
	}
	if inode(t, path) == inode(t, "/proc/self/ns/net") {
		t.Fatal("the namespace is the host's")
	}

	var l net.Listener
	if err := Do(path, func() error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("listen inside (is loopback up?): %v", err)
	}
	serve(t, l)
	addr := l.Addr().String()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Dialer(path)(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s inside: %v", addr, err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "ns\n" {
		t.Fatalf("read from the listener inside: %q, %v", got, err)
	}

	// From the host's namespace the port is closed, or someone else's.
	hc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		hc.SetReadDeadline(time.Now().Add(time.Second))
		got, _ := io.ReadAll(hc)
		hc.Close()
		if string(got) == "ns\n" {
			t.Fatalf("dial %s from the host reached the listener inside the namespace", addr)
		}
	}
}

func TestCreateIdempotent(t *testing.T) {
	path := newNS(t)
	id := inode(t, path)
	if err := Create(path); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if got := inode(t, path); got != id {
		t.Errorf("second Create replaced the namespace: inode %d, was %d", got, id)
	}
	if n := mounts(t, path); n != 1 {
		t.Errorf("%d mounts at %s, want 1", n, path)
	}
}

func TestCreateOnLeftoverFile(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(t.TempDir(), "pod")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Delete(path) })
	if ok, err := Exists(path); err != nil || !ok {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
}

func TestDelete(t *testing.T) {
	path := newNS(t)
	if err := Delete(path); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(path); err != nil || ok {
		t.Fatalf("Exists after Delete = %v, %v; want false", ok, err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file after Delete: %v; want it gone", err)
	}
	if n := mounts(t, path); n != 0 {
		t.Errorf("%d mounts at %s after Delete", n, path)
	}
	if err := Delete(path); err != nil {
		t.Errorf("Delete of a deleted namespace: %v", err)
	}
	if err := Do(path, func() error { return nil }); err == nil {
		t.Error("Do in a deleted namespace: no error")
	}
}

func TestDoReturnsHome(t *testing.T) {
	path := newNS(t)
	host := inode(t, "/proc/self/ns/net")
	want := inode(t, path)
	for range 20 {
		if err := Do(path, func() error {
			if got := inode(t, "/proc/thread-self/ns/net"); got != want {
				t.Errorf("inside Do: namespace inode %d, want %d", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := inode(t, "/proc/thread-self/ns/net"); got != host {
			t.Fatalf("after Do: the goroutine's namespace inode %d, want the host's %d", got, host)
		}
	}
	// No thread of the process was left in the pod's namespace.
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if got := inode(t, task); got != host {
			t.Errorf("%s: namespace inode %d, want the host's %d", task, got, host)
		}
	}

	errF := errors.New("from f")
	if err := Do(path, func() error { return errF }); !errors.Is(err, errF) {
		t.Errorf("Do = %v; want f's error", err)
	}
}

func TestRejects(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(file); err != nil || ok {
		t.Errorf("Exists(plain file) = %v, %v; want false", ok, err)
	}
	if ok, err := Exists(filepath.Join(dir, "none")); err != nil || ok {
		t.Errorf("Exists(missing) = %v, %v; want false", ok, err)
	}
	// The namespace's type is asked with an ioctl that user-mode
	// emulation (the ARM test runs) does not have.
	if f, err := os.Open("/proc/self/ns/net"); err == nil {
		_, ioctlErr := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
		f.Close()
		if ioctlErr == nil {
			if _, err := Exists("/proc/self/ns/mnt"); err == nil || !strings.Contains(err.Error(), "not a network one") {
				t.Errorf("Exists(mount namespace) = %v; want an error", err)
			}
		} else {
			t.Logf("NS_GET_NSTYPE: %v: the type check of Exists is not tested here", ioctlErr)
		}
	}
	if err := Do(file, func() error { return nil }); err == nil || !strings.Contains(err.Error(), "not a namespace") {
		t.Errorf("Do(plain file) = %v; want an error", err)
	}
	if err := Create(dir); err == nil {
		t.Error("Create on a directory: no error")
	}
	for _, p := range []string{"", "rel/pod", "/run/../pod"} {
		if err := Create(p); err == nil {
			t.Errorf("Create(%q): no error", p)
		}
		if err := Delete(p); err == nil {
			t.Errorf("Delete(%q): no error", p)
		}
	}
	if err := Delete(dir); err == nil {
		t.Error("Delete of a directory: no error")
	}
	if _, err := Dialer(file)(t.Context(), "unix", "/x"); err == nil {
		t.Error("Dialer with network unix: no error")
	}
}
