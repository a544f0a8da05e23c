package hw

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Facts describe a board as its Node object reports it.
type Facts struct {
	// Arch is the Kubernetes architecture (kubernetes.io/arch): amd64,
	// arm64 or arm. ARMVersion is 6 or 7 on arm (the binary's GOARM, which
	// the board runs): a Pi Zero or Pi 1 is arm v6.
	Arch       string
	ARMVersion int
	CPUs       int
	Memory     int64 // bytes
	Kernel     string
	OSImage    string
	MachineID  string
	BootID     string
	// Model and Serial are the board's from the device tree, as in Board:
	// empty off a device-tree board, or when malformed (ReadBoard says
	// why).
	Model, Serial string
}

// Platform is Arch with the ARM version, as in OCI platforms: arm64,
// arm/v6, arm/v7, amd64.
func (f Facts) Platform() string {
	if f.Arch == "arm" && f.ARMVersion > 0 {
		return fmt.Sprintf("arm/v%d", f.ARMVersion)
	}
	return f.Arch
}

// Read gathers the facts from /proc, /etc and /sys; what cannot be read
// stays empty, except memory, which a Node must report.
func Read() (Facts, error) {
	f := Facts{Arch: runtime.GOARCH, ARMVersion: goarm(), CPUs: runtime.NumCPU()}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return f, fmt.Errorf("hw: %w", err)
	}
	f.Memory = mem
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		f.Kernel = utsString(u.Release[:])
	}
	f.OSImage = osImage("/etc/os-release")
	f.MachineID = firstLine("/etc/machine-id")
	f.BootID = firstLine("/proc/sys/kernel/random/boot_id")
	f.Model, f.Serial, _ = readDeviceTree("/") // optional: ReadBoard reports their errors
	return f, nil
}

func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("memory size: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0, fmt.Errorf("memory size: %s: MemTotal %q", path, fields[1])
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("memory size: %s has no MemTotal", path)
}

func osImage(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

func utsString[T int8 | uint8](a []T) string {
	b := make([]byte, 0, len(a))
	for _, c := range a {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
