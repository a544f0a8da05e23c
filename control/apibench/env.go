package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// environment is what the numbers were measured on.
type environment struct {
	tempDir     string
	kernel      string
	cpus        int
	cpuModel    string
	disk        string
	isleVersion string
	goVersion   string
	protocol    string // HTTP protocol the API answered with
}

// Magic numbers of file systems that live in memory (statfs f_type).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// probeEnvironment reads versions and machine facts and, last, creates the
// temporary directory: on the disk of os.TempDir(), or of /var/tmp when
// that is in memory, where fsync would cost nothing.
func probeEnvironment(ctx context.Context, isle string) (environment, error) {
	env := environment{
		kernel:    readTrim("/proc/sys/kernel/osrelease"),
		cpus:      runtime.NumCPU(),
		cpuModel:  cpuModel(),
		goVersion: runtime.Version(),
	}
	var err error
	if env.isleVersion, err = firstLine(ctx, isle, "version"); err != nil {
		return env, err
	}
	base := ""
	for _, dir := range []string{os.TempDir(), "/var/tmp"} {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			continue
		}
		if t := uint32(st.Type); t != tmpfsMagic && t != ramfsMagic {
			base = dir
			break
		}
	}
	if base == "" {
		return env, fmt.Errorf("choose a data directory: %s and /var/tmp are in memory (tmpfs) or missing; set TMPDIR to a directory on disk", os.TempDir())
	}
	if env.tempDir, err = os.MkdirTemp(base, "isle-apibench-"); err != nil {
		return env, fmt.Errorf("create temporary directory: %w", err)
	}
	env.disk = describeDisk(env.tempDir)
	return env, nil
}

// firstLine runs bin args and returns the first line of its output.
func firstLine(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("run %s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// describeDisk names the mount that holds dir: device, file system and
// mount point.
func describeDisk(dir string) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	var best, desc string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 2 {
			continue
		}
		mp := a[4]
		within := mp == "/" || real == mp || strings.HasPrefix(real, mp+"/")
		if !within || len(mp) < len(best) {
			continue
		}
		best = mp
		desc = fmt.Sprintf("%s (%s) mounted on %s", b[1], b[0], mp)
	}
	if desc == "" {
		return "unknown"
	}
	return desc
}
