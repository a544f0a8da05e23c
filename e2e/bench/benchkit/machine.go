// Package benchkit holds what isle's benchmark commands share: their main
// function and common flags, facts about the machine, a data directory on
// a real disk (so that fsync costs what it costs), the processes they start
// with their logs and what /proc tells of them, /metrics scrapes, and the
// formatting of their reports. It knows nothing of isle's packages;
// isleserver, below it, runs an isle server for a benchmark.
package benchkit

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

// Machine is what the numbers were measured on.
type Machine struct {
	Kernel   string
	CPUs     int
	CPUModel string
}

// ReadMachine reads the kernel release, CPU count and CPU model.
func ReadMachine() Machine {
	return Machine{Kernel: readTrim("/proc/sys/kernel/osrelease"), CPUs: runtime.NumCPU(), CPUModel: cpuModel()}
}

// Magic numbers of file systems that live in memory (statfs f_type).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// DataDir creates a temporary directory named prefix* on the disk of
// os.TempDir(), or of /var/tmp when that is in memory (where fsync would
// cost nothing), and describes that disk.
func DataDir(prefix string) (dir, disk string, err error) {
	base := ""
	for _, d := range []string{os.TempDir(), "/var/tmp"} {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err != nil {
			continue
		}
		if t := uint32(st.Type); t != tmpfsMagic && t != ramfsMagic {
			base = d
			break
		}
	}
	if base == "" {
		return "", "", fmt.Errorf("choose a data directory: %s and /var/tmp are in memory (tmpfs) or missing; set TMPDIR to a directory on disk", os.TempDir())
	}
	if dir, err = os.MkdirTemp(base, prefix); err != nil {
		return "", "", fmt.Errorf("create temporary directory: %w", err)
	}
	return dir, describeDisk(dir), nil
}

// FirstLine runs bin args and returns the first line of its output.
func FirstLine(ctx context.Context, bin string, args ...string) (string, error) {
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

// describeDisk names the mount that holds dir: device, file system, mount
// point, and whether the kernel calls the device rotational.
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
		if !within(real, mp) || len(mp) < len(best) {
			continue
		}
		best = mp
		desc = fmt.Sprintf("%s (%s) mounted on %s, rotational=%s", b[1], b[0], mp, rotational(a[2]))
	}
	if desc == "" {
		return "unknown"
	}
	return desc
}

func within(path, mp string) bool {
	return mp == "/" || path == mp || strings.HasPrefix(path, mp+"/")
}

// rotational reads queue/rotational of block device MAJ:MIN (or of the
// disk a partition belongs to).
func rotational(majMin string) string {
	dev, err := filepath.EvalSymlinks("/sys/dev/block/" + majMin)
	if err != nil {
		return "unknown"
	}
	for _, d := range []string{dev, filepath.Dir(dev)} {
		if b, err := os.ReadFile(filepath.Join(d, "queue", "rotational")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return "unknown"
}
