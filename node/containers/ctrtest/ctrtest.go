// Package ctrtest starts the real parts the node agent's tests run
// against: a containerd daemon of the test's own (own root, state and
// socket), Debian's docker-registry on a loopback port, and OCI images
// built in the test (busybox from the machine, static binaries) pushed to
// it, so the real pull path is exercised.
package ctrtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/volumes"
)

// Require fails (in CI) or skips (elsewhere) a test when the machine
// cannot run containers: not root, or containerd, runc or docker-registry
// missing. `make setup` installs them.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range append([]string{"containerd", "runc"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("needs %s (run `make setup` as root)", strings.Join(missing, ", "))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Containerd starts a containerd daemon for the test and returns its socket
// address. The daemon's root, state and socket are under a directory of
// the test; the CRI plugin is off (isle is not a CRI client). The daemon
// and every shim and container it started are stopped when the test ends.
func Containerd(t testing.TB) string {
	t.Helper()
	Require(t)
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		t.Fatal(err)
	}
	d, err := StartContainerd(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(d.LogPath); err == nil {
				t.Logf("containerd log (last 4 KiB):\n%s", tail(b, 4096))
			}
		}
		_ = os.RemoveAll(dir)
	})
	return d.Socket
}

// Daemon is a containerd started by StartContainerd.
type Daemon struct {
	Socket, LogPath string
	dir             string
	cmd             *exec.Cmd
	logf            *os.File
}

// StartContainerd starts containerd with its root, state, socket and log
// under dir, and waits for it to answer.
func StartContainerd(dir string) (*Daemon, error) {
	d := &Daemon{Socket: filepath.Join(dir, "containerd.sock"), LogPath: filepath.Join(dir, "containerd.log"), dir: dir}
	config := containers.DaemonConfig(dir, filepath.Join(dir, "state"), d.Socket)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(d.LogPath)
	if err != nil {
		return nil, err
	}
	d.logf = logf
	d.cmd = exec.Command("containerd", "--config", cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", d.Socket)
		if err == nil {
			c.Close()
			return d, nil
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("containerd did not answer on %s within 20 s (log: %s)", d.Socket, d.LogPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the daemon's containers, its shims and the daemon, and
// unmounts what is left under its directory.
func (d *Daemon) Stop() {
	killContainers(d.Socket)
	stopShims(d.dir)
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.logf.Close()
	UnmountUnder(d.dir)
}

// stopShims kills the shims of the daemon rooted at dir: their command
// lines name its socket.
func stopShims(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim")) || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil {
			if proc, err := os.FindProcess(pid); err == nil {
				_ = proc.Kill()
			}
		}
	}
}

// UnmountUnder lazily unmounts whatever is still mounted below dir
// (rootfs overlays, pods' volumes, network namespaces left by a killed
// process), deepest first.
func UnmountUnder(dir string) { _ = volumes.UnmountUnder(dir) }

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Context is a context for a test's calls, ended with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// killContainers kills and deletes every container of every namespace of
// the daemon at sock, so no container process outlives the test.
func killContainers(sock string) {
	client, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nss, err := client.NamespaceService().List(ctx)
	if err != nil {
		return
	}
	for _, ns := range nss {
		nctx := namespaces.WithNamespace(ctx, ns)
		cs, err := client.Containers(nctx)
		if err != nil {
			continue
		}
		for _, c := range cs {
			if t, err := c.Task(nctx, nil); err == nil {
				if exited, err := t.Wait(nctx); err == nil {
					if t.Kill(nctx, syscall.SIGKILL, containerd.WithKillAll) == nil {
						select {
						case <-exited:
						case <-time.After(5 * time.Second):
						}
					}
				}
				_, _ = t.Delete(nctx, containerd.WithProcessKill)
			}
			_ = c.Delete(nctx, containerd.WithSnapshotCleanup)
		}
	}
}
