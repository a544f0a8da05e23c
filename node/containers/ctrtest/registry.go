package ctrtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
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
	auth := ""
	if htpasswd != "" {
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: isle-test\n    path: %s\n", htpasswd)
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(dir, "data"), addr, auth)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
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
