package island

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
)

// start runs a daemon of the island in the network namespace at ns ("":
// the host's), in a session of its own (it outlives `isle up`), its
// output appended to logPath.
func start(ns, logPath string, name string, args ...string) (Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Proc{}, fmt.Errorf("island: %s: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	run := cmd.Start
	if ns != "" {
		// The child is forked from a thread inside the namespace, and
		// inherits it.
		run = func() error { return netns.Do(ns, cmd.Start) }
	}
	if err := run(); err != nil {
		return Proc{}, fmt.Errorf("island: start %s: %w", name, err)
	}
	p := Proc{PID: cmd.Process.Pid}
	p.Start, _ = startTime(p.PID)
	// Nobody waits for it: it is the island's, not this command's.
	_ = cmd.Process.Release()
	return p, nil
}

// stat reads a process's state letter and start time from /proc.
func stat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("island: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("island: /proc/%d/stat: unexpected format", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("island: /proc/%d/stat: start time %q", pid, f[19])
	}
	return f[0][0], start, nil
}

func startTime(pid int) (uint64, error) {
	_, st, err := stat(pid)
	return st, err
}

// Alive reports whether the process still runs (not another process with
// its PID, not gone but for its exit status).
func (p Proc) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	state, st, err := stat(p.PID)
	return err == nil && st == p.Start && running(p.PID, state)
}

// running reports whether a process in state is still running: not a
// zombie, or a zombie only in its first thread while others still exit
// (a killed Go process's threads die one by one, and its sockets close
// with the last).
func running(pid int, state byte) bool {
	if state != 'Z' && state != 'X' {
		return true
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return err == nil && len(tasks) > 1
}

// signal sends sig to the process if it is still the one recorded.
func (p Proc) signal(sig syscall.Signal) {
	if p.Alive() {
		_ = syscall.Kill(p.PID, sig)
	}
}

// stop sends SIGTERM and waits up to grace for the process to end.
func (p Proc) stop(grace time.Duration) bool {
	p.signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for p.Alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// nsInode is the inode of the network namespace at path (a bind mount of
// one, or /proc/PID/ns/net); 0 if there is none.
func nsInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return 0
	}
	return st.Ino
}

// killBoard kills (SIGKILL) every process of a board, as pulling its
// power does: those inside one of the network namespaces at paths (isle,
// containerd, the shims, hostNetwork pods) and those in the cgroup tree
// cgroup (the pods' containers, also when their namespaces are gone), and
// waits until they are gone (zombies left to whoever reaps them count as
// gone).
func killBoard(paths []string, cgroup string) error {
	inodes := map[uint64]bool{}
	for _, p := range paths {
		if ino := nsInode(p); ino != 0 {
			inodes[ino] = true
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := append(procsIn(inodes), procsOfCgroup(cgroup)...)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("island: processes %v did not end after SIGKILL", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procsOfCgroup lists the live processes in the cgroup tree at path (as
// /isle-island/pi2), in every hierarchy (cgroup v1) or the unified one.
func procsOfCgroup(path string) []int {
	var pids []int
	seen := map[int]bool{}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	roots = append(roots, "/sys/fs/cgroup"+path)
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil || seen[pid] || pid == os.Getpid() {
					continue
				}
				seen[pid] = true
				if state, _, err := stat(pid); err == nil && running(pid, state) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// procsIn lists the live processes whose network namespace is one of
// inodes.
func procsIn(inodes map[uint64]bool) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		link, err := os.Readlink(d + "/ns/net")
		if err != nil {
			continue
		}
		var ino uint64
		if _, err := fmt.Sscanf(link, "net:[%d]", &ino); err != nil || !inodes[ino] {
			continue
		}
		if state, _, err := stat(pid); err == nil && running(pid, state) {
			pids = append(pids, pid)
		}
	}
	return pids
}
