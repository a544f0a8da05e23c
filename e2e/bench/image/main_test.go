package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/islandbench"
)

func TestParse(t *testing.T) {
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{isle: "out/isle", arm64: "out/isle-linux-arm64", dir: "/tmp/isle-imagebench", trials: 3, scratch: true,
		cache: "/var/cache/isle-image", settle: 30 * time.Second}
	if o != want {
		t.Errorf("defaults: %+v, want %+v", o, want)
	}
	o, err = parse([]string{"-dir", "rel", "-cache", "c", "-trials", "10", "-scratch=false", "-settle", "0s", "-isle", "a", "-arm64", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(o.dir) || filepath.Base(o.dir) != "rel" || !filepath.IsAbs(o.cache) || filepath.Base(o.cache) != "c" ||
		o.trials != 10 || o.scratch || o.settle != 0 || o.isle != "a" || o.arm64 != "b" {
		t.Errorf("parsed %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-trials", "0"}, "-trials 0: want 1 to 10"},
		{[]string{"-trials", "11"}, "-trials 11"},
		{[]string{"-settle", "-1s"}, "-settle -1s"},
		{[]string{"-settle", "11m"}, "-settle 11m0s"},
		{[]string{"-dir", ""}, "-dir: want a directory"},
		{[]string{"-cache", ""}, "-cache: want a directory"},
		{[]string{"-isle", ""}, "-isle"},
		{[]string{"-arm64", ""}, "-arm64"},
		{[]string{"-dir", "/"}, "-dir /: the bench removes it"},
		{[]string{"-dir", "/var/cache"}, "not holding -cache /var/cache/isle-image"},
		{[]string{"-dir", "/var/cache/isle-image"}, "-dir /var/cache/isle-image"},
		{[]string{"-scratch=maybe"}, "invalid boolean"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-no-such-flag"}, "not defined"},
	} {
		if _, err := parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/a", "/a/b", false},
		{"/ab", "/a", false},
		{"/x/..y", "/x", true},
		{"/b", "/a", false},
	} {
		if got := within(c.path, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

func TestClaimDir(t *testing.T) {
	base := t.TempDir()
	isl := func(dir string) *islandbench.Island {
		return &islandbench.Island{Bin: "/nonexistent/isle", Dir: filepath.Join(dir, "island"), Servers: 1}
	}

	fresh := filepath.Join(base, "fresh")
	if err := claimDir(fresh, isl(fresh)); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, marker)); err != nil {
		t.Errorf("no marker in a claimed directory: %v", err)
	}

	// What an earlier run left goes (it has no island.json: isle down is
	// not run).
	if err := os.WriteFile(filepath.Join(fresh, "card.img"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(fresh, isl(fresh)); err != nil {
		t.Fatalf("an earlier run's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "card.img")); !os.IsNotExist(err) {
		t.Errorf("an earlier run's file is still there: %v", err)
	}

	foreign := filepath.Join(base, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(foreign, isl(foreign)); err == nil || !strings.Contains(err.Error(), "not the bench's") {
		t.Errorf("a directory of other files: %v, want an error", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "precious")); err != nil {
		t.Errorf("a foreign file was removed: %v", err)
	}

	empty := filepath.Join(base, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(empty, isl(empty)); err != nil {
		t.Errorf("an empty directory: %v", err)
	}
}
