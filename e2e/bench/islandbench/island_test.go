package islandbench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/node/island"
)

// fakeIsle writes a shell script standing in for the isle binary: it
// appends its arguments to BIN.args, prints out (no single quotes) and
// exits with code.
func fakeIsle(t *testing.T, out string, code int) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "isle")
	script := "#!/bin/sh\necho \"$*\" >> \"$0.args\"\nprintf '%s\\n' '" + out + "'\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestUp(t *testing.T) {
	bin := fakeIsle(t, "ready", 0)
	i := &Island{Bin: bin, Dir: "/tmp/some-island", Servers: 1, Agents: 2}
	if _, err := i.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	args, err := os.ReadFile(bin + ".args")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(args)), "up --dir /tmp/some-island --servers 1 --agents 2"; got != want {
		t.Errorf("isle ran with %q, want %q", got, want)
	}
}

func TestUpRefusedByAnotherIsland(t *testing.T) {
	i := &Island{Bin: fakeIsle(t, "isle: "+island.ErrRunning.Error()+" (in /var/lib/isle-island)", 1), Dir: t.TempDir(), Servers: 1, Agents: 1}
	_, err := i.Up(context.Background())
	if err == nil || !strings.Contains(err.Error(), "wait for it to end, and run again") {
		t.Fatalf("err = %v, want the advice to wait for the other island", err)
	}
	i.Bin = fakeIsle(t, "boom", 1)
	if _, err = i.Up(context.Background()); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want isle up's output", err)
	}
}

func TestDown(t *testing.T) {
	dir := t.TempDir()
	bin := fakeIsle(t, "", 0)
	i := &Island{Bin: bin, Dir: dir}
	if err := i.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin + ".args"); err == nil {
		t.Fatal("isle down ran without an island in the directory")
	}
	if err := os.WriteFile(filepath.Join(dir, "island.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := i.Down(); err != nil {
		t.Fatal(err)
	}
	if args, err := os.ReadFile(bin + ".args"); err != nil || strings.TrimSpace(string(args)) != "down --dir "+dir {
		t.Fatalf("isle ran with %q (%v), want down --dir %s", args, err, dir)
	}
	i.Bin = fakeIsle(t, "cannot remove", 1)
	if err := i.Down(); err == nil || !strings.Contains(err.Error(), "cannot remove") {
		t.Fatalf("err = %v, want isle down's output", err)
	}
}
