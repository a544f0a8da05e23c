package ctrtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/containers"
)

// Registry starts Debian's docker-registry (distribution 2.8) on a free
// loopback port with storage in a directory of the test, and returns its
// host:port. With htpasswd set (a file of bcrypt entries) the registry
// asks for basic authentication.
func Registry(t testing.TB, htpasswd string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return RegistryAt(t, addr, htpasswd)
}

// RegistryAt is Registry listening on addr (host:port).
func RegistryAt(t testing.TB, addr, htpasswd string) string {
	t.Helper()
	Require(t, "docker-registry")
	dir := t.TempDir()
	config := containers.RegistryConfig(filepath.Join(dir, "data"), addr, htpasswd)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker-registry", "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	waitFor(t, "registry on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return addr
}
