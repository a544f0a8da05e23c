package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kernel command line words about the memory cgroup.
const (
	enableMemory  = "cgroup_enable=memory"
	disableMemory = "cgroup_disable=memory"
	oldMemoryFlag = "cgroup_memory=1"
)

// cmdlineFiles are where Raspberry Pi firmware reads the kernel command
// line from, newest image layout first: since bookworm /boot/cmdline.txt
// is only a note that the file moved.
var cmdlineFiles = []string{"/boot/firmware/cmdline.txt", "/boot/cmdline.txt"}

// CheckMemoryCgroup checks that the kernel has the memory cgroup
// controller enabled, which pods' memory limits and usage need: with
// cgroup v2, /sys/fs/cgroup/cgroup.controllers lists memory; with v1,
// /proc/cgroups has memory enabled and a cgroup hierarchy with memory is
// mounted (/proc/mounts). root is the filesystem root these paths are
// under: "/" on a board, a directory of fake files in tests.
//
// Raspberry Pi kernels have the memory cgroup disabled by default: the
// error then says which line to change in which cmdline.txt.
func CheckMemoryCgroup(root string) error {
	under := func(p string) string { return filepath.Join(root, p) }
	b, err := os.ReadFile(under("/sys/fs/cgroup/cgroup.controllers"))
	switch {
	case err == nil:
		if slices.Contains(strings.Fields(string(b)), "memory") {
			return nil
		}
		return memoryDisabled(root, "cgroup v2: /sys/fs/cgroup/cgroup.controllers has no memory")
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("hw: memory cgroup: %w", err)
	}

	// cgroup v1, or hybrid with v1 controllers.
	if b, err = os.ReadFile(under("/proc/cgroups")); err != nil {
		return fmt.Errorf("hw: memory cgroup: %w", err)
	}
	enabled, found, err := memoryRow(string(b))
	switch {
	case err != nil:
		return fmt.Errorf("hw: memory cgroup: /proc/cgroups: %w", err)
	case !found:
		return errors.New("hw: memory cgroup: this kernel has no cgroup v1 memory controller (/proc/cgroups has no memory row; " +
			"kernels from 6.12 on have it only if built with CONFIG_MEMCG_V1): boot with cgroup v2 (remove " +
			"systemd.unified_cgroup_hierarchy=0 from the kernel command line) or use a kernel built with the memory cgroup")
	case !enabled:
		return memoryDisabled(root, "cgroup v1: /proc/cgroups shows memory disabled")
	}
	if b, err = os.ReadFile(under("/proc/mounts")); err != nil {
		return fmt.Errorf("hw: memory cgroup: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		// cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "cgroup" && slices.Contains(strings.Split(f[3], ","), "memory") {
			return nil
		}
	}
	return errors.New("hw: memory cgroup: enabled, but no cgroup v1 hierarchy with memory is mounted (/proc/mounts): " +
		"mount it where systemd does: mkdir -p /sys/fs/cgroup/memory && mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory")
}

// memoryRow finds the memory controller in /proc/cgroups
// ("#subsys_name hierarchy num_cgroups enabled").
func memoryRow(text string) (enabled, found bool, err error) {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "memory" {
			continue
		}
		if len(f) < 4 || (f[3] != "0" && f[3] != "1") {
			return false, true, fmt.Errorf("memory row %q: want name, hierarchy, number of cgroups, enabled 0 or 1", strings.TrimSpace(line))
		}
		return f[3] == "1", true, nil
	}
	return false, false, nil
}

// memoryDisabled is the error for a kernel with the memory cgroup
// disabled, with the fix for this board's boot files: root's cmdline.txt
// and the running kernel's command line (/proc/cmdline).
func memoryDisabled(root, what string) error {
	file, words := "", []string(nil)
	for _, f := range cmdlineFiles {
		if b, err := os.ReadFile(filepath.Join(root, f)); err == nil {
			file, words = f, strings.Fields(string(b))
			break
		}
	}
	b, _ := os.ReadFile(filepath.Join(root, "/proc/cmdline")) // only refines the advice
	running := strings.Fields(string(b))

	var fix string
	switch {
	case file == "":
		fix = "add " + enableMemory + " to the kernel command line (on Raspberry Pi OS: the single line of " + cmdlineFiles[0] +
			", or " + cmdlineFiles[1] + " on images before bookworm; elsewhere the boot loader's, such as GRUB_CMDLINE_LINUX " +
			"in /etc/default/grub) and reboot"
	case slices.Contains(words, disableMemory):
		fix = fmt.Sprintf("remove %s from %s, add %s at the end of its single line, and reboot", disableMemory, file, enableMemory)
	case slices.Contains(words, enableMemory) && !slices.Contains(running, enableMemory):
		fix = fmt.Sprintf("%s has %s but the running kernel was started without it: reboot", file, enableMemory)
	case slices.Contains(words, enableMemory) && slices.Index(running, disableMemory) > slices.Index(running, enableMemory):
		fix = fmt.Sprintf("%s comes after %s in the running kernel's command line (/proc/cmdline) and the later one wins: "+
			"move %s to the end of the single line of %s and reboot", disableMemory, enableMemory, enableMemory, file)
	case slices.Contains(words, enableMemory):
		fix = fmt.Sprintf("the kernel was started with %s and still has the memory cgroup disabled: update the kernel "+
			"and firmware (apt full-upgrade) and reboot", enableMemory)
	default:
		fix = fmt.Sprintf("add %s to the single line of %s (on the same line, after a space) and reboot", enableMemory, file)
	}
	note := "Raspberry Pi kernels disable the memory cgroup by default, and from 6.12 on " + oldMemoryFlag +
		" alone no longer enables it: " + enableMemory + " is needed"
	if slices.Contains(words, oldMemoryFlag) && !slices.Contains(words, enableMemory) {
		note = fmt.Sprintf("%s has %s, which alone no longer enables it on Raspberry Pi kernels 6.12 and later: %s is needed",
			file, oldMemoryFlag, enableMemory)
	}
	return fmt.Errorf("hw: memory cgroup disabled (%s); pods' memory limits need it: %s (%s)", what, fix, note)
}
