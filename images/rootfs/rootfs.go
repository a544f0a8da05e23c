// Package rootfs builds a Debian root filesystem for another architecture
// with mmdebstrap (its maintainer scripts run under qemu-user through
// binfmt_misc), as a tarball kept in a cache keyed by everything that went
// into it, so that a rebuild with the same package list takes no time.
package rootfs

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Spec is what a root filesystem is made of.
type Spec struct {
	Suite      string   // Debian release, "bookworm"
	Arch       string   // Debian architecture, "arm64"
	Variant    string   // mmdebstrap variant, "minbase"
	Components []string // "main", "non-free-firmware"
	Packages   []string // installed besides the variant's own
	Mirror     string   // the Debian mirror's URL
	// Setup are files written into the root before any package is
	// installed (configuration that packages' scripts read as they
	// install, such as initramfs-tools'), by path inside the root.
	Setup map[string]string
}

// Key identifies what Build makes of s: equal Specs (packages and
// components in any order) have equal keys.
func (s Spec) Key() string {
	h := sha256.New()
	field := func(v string) { fmt.Fprintf(h, "%d:%s\n", len(v), v) }
	field(s.Suite)
	field(s.Arch)
	field(s.Variant)
	for _, l := range [][]string{s.Components, s.Packages} {
		l = slices.Sorted(slices.Values(l))
		field(strings.Join(l, ","))
	}
	field(s.Mirror)
	for _, p := range slices.Sorted(maps.Keys(s.Setup)) {
		field(p)
		field(s.Setup[p])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// check says what is wrong with s.
func (s Spec) check() error {
	switch {
	case s.Suite == "" || strings.ContainsAny(s.Suite, " /"):
		return fmt.Errorf("rootfs: suite %q: want a Debian release such as bookworm", s.Suite)
	case s.Arch == "" || strings.ContainsAny(s.Arch, " /,"):
		return fmt.Errorf("rootfs: architecture %q: want a Debian architecture such as arm64", s.Arch)
	case !strings.HasPrefix(s.Mirror, "http://") && !strings.HasPrefix(s.Mirror, "https://"):
		return fmt.Errorf("rootfs: mirror %q: want an http:// or https:// URL", s.Mirror)
	}
	for _, p := range append(slices.Clone(s.Packages), s.Components...) {
		if p == "" || strings.ContainsAny(p, " ,'\"\n") {
			return fmt.Errorf("rootfs: package or component %q: not a Debian name", p)
		}
	}
	for p := range s.Setup {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("rootfs: setup file %q: want a clean absolute path inside the root", p)
		}
	}
	return nil
}

// args are mmdebstrap's arguments to build s into out, with the setup
// files in the directory setup.
func (s Spec) args(out, setup string) []string {
	// Verbose: apt's and dpkg's lines too, which relay counts.
	a := []string{"--verbose", "--mode=root", "--arch=" + s.Arch, "--format=tar"}
	if s.Variant != "" {
		a = append(a, "--variant="+s.Variant)
	}
	if len(s.Components) > 0 {
		a = append(a, "--components="+strings.Join(s.Components, ","))
	}
	if len(s.Packages) > 0 {
		a = append(a, "--include="+strings.Join(s.Packages, ","))
	}
	if len(s.Setup) > 0 {
		a = append(a, "--setup-hook=sync-in "+setup+" /")
	}
	return append(a, s.Suite, out, s.Mirror)
}

// Build returns the path of a tarball of s's root filesystem in cacheDir,
// building it with mmdebstrap unless the cache has it; cached says which.
// mmdebstrap's progress lines go to log.
func Build(ctx context.Context, s Spec, cacheDir string, log *slog.Logger) (path string, cached bool, err error) {
	if err := s.check(); err != nil {
		return "", false, err
	}
	path = filepath.Join(cacheDir, "rootfs-"+s.Suite+"-"+s.Arch+"-"+s.Key()+".tar")
	if _, err := os.Stat(path); err == nil {
		return path, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("rootfs: cache: %w", err)
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", false, errors.New("rootfs: mmdebstrap not found: apt-get install mmdebstrap qemu-user-static")
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", false, fmt.Errorf("rootfs: cache: %w", err)
	}
	work, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return "", false, fmt.Errorf("rootfs: %w", err)
	}
	defer os.RemoveAll(work)
	setup := filepath.Join(work, "setup")
	for p, content := range s.Setup {
		f := filepath.Join(setup, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return "", false, fmt.Errorf("rootfs: setup file %s: %w", p, err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return "", false, fmt.Errorf("rootfs: setup file %s: %w", p, err)
		}
	}
	out := filepath.Join(work, "rootfs.tar")
	cmd := exec.CommandContext(ctx, "mmdebstrap", s.args(out, setup)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", false, fmt.Errorf("rootfs: %w", err)
	}
	cmd.Stdout = cmd.Stderr
	log.Info("building the root filesystem with mmdebstrap", "suite", s.Suite, "arch", s.Arch, "packages", len(s.Packages), "cache", path)
	if err := cmd.Start(); err != nil {
		return "", false, fmt.Errorf("rootfs: mmdebstrap: %w", err)
	}
	tail := relay(stderr, log, 10*time.Second)
	if err := cmd.Wait(); err != nil {
		return "", false, fmt.Errorf("rootfs: mmdebstrap: %w; its last lines:\n%s", err, strings.Join(<-tail, "\n"))
	}
	if err := os.Rename(out, path); err != nil {
		return "", false, fmt.Errorf("rootfs: cache: %w", err)
	}
	return path, false, nil
}

// relay logs mmdebstrap's progress lines ("I: installing ...") and, while
// it installs, how many of the packages apt is installing are set up, at
// most once every interval. It sends the last lines mmdebstrap printed once
// it closed its output.
func relay(r io.Reader, log *slog.Logger, every time.Duration) <-chan []string {
	last := make(chan []string, 1)
	go func() {
		var (
			lines       []string
			total, done int
			logged      time.Time
		)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l := sc.Text()
			switch m := aptSummary.FindStringSubmatch(l); {
			case strings.HasPrefix(l, "I: "):
				log.Info("mmdebstrap: " + strings.TrimPrefix(l, "I: "))
			case m != nil:
				total, done = atoi(m[1]), 0
			case strings.HasPrefix(l, "Setting up ") && total > 0:
				done++
				if time.Since(logged) >= every || done == total {
					log.Info("mmdebstrap: packages set up", "done", done, "of", total)
					logged = time.Now()
				}
			}
			lines = append(lines, l)
			if len(lines) > 20 {
				lines = lines[1:]
			}
		}
		last <- lines
	}()
	return last
}

// aptSummary is apt's line before it installs: how many packages.
var aptSummary = regexp.MustCompile(`^\d+ upgraded, (\d+) newly installed`)

// atoi is strconv.Atoi of digits aptSummary matched.
func atoi(digits string) int {
	n, _ := strconv.Atoi(digits)
	return n
}
